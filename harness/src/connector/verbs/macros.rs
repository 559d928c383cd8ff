//! The macros behind `verbs!` and `replies!` (see the parent module for what a declaration
//! says). They expand in the parent, so every name they use is the parent's.

/// A field's case-table entry, from its options (`None`: not a case argument): munched left
/// to right into (is an argument, default, range).
macro_rules! case_arg {
    ($f:ident $ty:ty; $($opt:tt)*) => { case_arg!(@ $f $ty, no, None, None; $($opt)*) };
    (@ $f:ident $ty:ty, no, $d:expr, $r:expr;) => { None };
    (@ $f:ident $ty:ty, yes, $d:expr, $r:expr;) => {
        Some(Arg { name: stringify!($f), kind: <$ty as CaseKind>::KIND, default: $d, range: $r })
    };
    (@ $f:ident $ty:ty, $a:ident, $d:expr, $r:expr; arg $(, $($rest:tt)*)?) => {
        case_arg!(@ $f $ty, yes, $d, $r; $($($rest)*)?)
    };
    (@ $f:ident $ty:ty, $a:ident, $d:expr, $r:expr; arg = $nd:expr $(, $($rest:tt)*)?) => {
        case_arg!(@ $f $ty, yes, Some(Value::from($nd)), $r; $($($rest)*)?)
    };
    (@ $f:ident $ty:ty, $a:ident, $d:expr, $r:expr; in $nr:expr $(, $($rest:tt)*)?) => {
        case_arg!(@ $f $ty, $a, $d, Some((*($nr).start(), *($nr).end())); $($($rest)*)?)
    };
    (@ $f:ident $ty:ty, $a:ident, $d:expr, $r:expr; check $e:expr $(, $($rest:tt)*)?) => {
        case_arg!(@ $f $ty, $a, $d, $r; $($($rest)*)?)
    };
}

/// A field's checks, from its options, in the order written.
macro_rules! field_checks {
    ($f:ident;) => {};
    ($f:ident; arg $(, $($rest:tt)*)?) => { field_checks!($f; $($($rest)*)?) };
    ($f:ident; arg = $d:expr $(, $($rest:tt)*)?) => { field_checks!($f; $($($rest)*)?) };
    ($f:ident; in $r:expr $(, $($rest:tt)*)?) => {
        let r = $r;
        range(stringify!($f), i64::from(*$f), *r.start(), *r.end())?;
        field_checks!($f; $($($rest)*)?)
    };
    ($f:ident; check $e:expr $(, $($rest:tt)*)?) => {
        $e?;
        field_checks!($f; $($($rest)*)?)
    };
}

/// `Some(field)` when the fields (each given twice: matched, then bound) have one named `$want`
/// (`session` or `queue`, the names a pattern can match).
macro_rules! named_field {
    ($want:ident;) => { None };
    (session; session $v:ident $($rest:tt)*) => { Some($v) };
    (queue; queue $v:ident $($rest:tt)*) => { Some($v) };
    ($want:ident; $other:ident $o:ident $($rest:tt)*) => { named_field!($want; $($rest)*) };
}

/// A reply shape's [`ReplyShape`] impl: a variant without a value (`[]`) or with one.
macro_rules! reply_shape {
    ($V:ident [] $W:ty) => {
        impl ReplyShape for shape::$V {
            type Out = ();
            type Wire = $W;
            fn take(reply: Reply) -> Result<(), Reply> {
                match reply {
                    Reply::$V => Ok(()),
                    other => Err(other),
                }
            }
            fn wrap(_: $W) -> Reply {
                Reply::$V
            }
        }
    };
    ($V:ident [$P:ty] $W:ty) => {
        impl ReplyShape for shape::$V {
            type Out = $P;
            type Wire = $W;
            fn take(reply: Reply) -> Result<$P, Reply> {
                match reply {
                    Reply::$V(v) => Ok(v),
                    other => Err(other),
                }
            }
            #[allow(
                clippy::useless_conversion,
                reason = "most wire types are the value itself"
            )]
            fn wrap(w: $W) -> Reply {
                Reply::$V(<$P>::from(w))
            }
        }
    };
}

/// The pattern of a reply shape in [`Reply::to_json`], binding its value to `$v`.
macro_rules! reply_pat {
    ($V:ident [] $v:ident) => {
        Reply::$V
    };
    ($V:ident [$P:ty] $v:ident) => {
        Reply::$V($v)
    };
}

/// The wire JSON of a reply shape's value `$v` (a variant without one: its wire type's default).
macro_rules! reply_json {
    ([] $W:ty, $v:ident) => {
        serde_json::to_value(<$W>::default())
    };
    ([$P:ty] $W:ty, $v:ident) => {
        serde_json::to_value($v)
    };
}

/// Declares every reply shape: `Variant(value) = wire type`, or `Variant = wire type` for one
/// without a value.
macro_rules! replies {
    ($( $(#[$doc:meta])* $V:ident $(($P:ty))? = $W:ty ),* $(,)?) => {
        /// A successful reply; which variant depends on the request (its verb's `-> Variant`).
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Reply {
            $( $(#[$doc])* $V $(($P))?, )*
        }

        /// One marker type per [`Reply`] variant: what a verb's declaration names (`-> Count`).
        pub mod shape {
            $(
                #[doc = concat!("[`super::Reply::", stringify!($V), "`].")]
                #[derive(Debug)]
                pub struct $V;
            )*
        }

        $( reply_shape!($V [$($P)?] $W); )*

        impl Reply {
            /// The wire `ok` value of this reply.
            pub fn to_json(&self) -> Value {
                let v = match self {
                    $( reply_pat!($V [$($P)?] v) => reply_json!([$($P)?] $W, v), )*
                };
                v.expect("replies always serialize")
            }
        }
    };
}

/// A verb's typed [`Verbs`] methods: one taking every field (no `typed` block), or the block's.
macro_rules! typed_methods {
    ([$(#[$doc:meta])*] $Variant:ident $name:ident $shape:ident [$($f:ident : $ty:ty),*] []) => {
        $(#[$doc])*
        fn $name(
            &mut self,
            $($f: <$ty as Param>::Arg<'_>),*
        ) -> Result<<shape::$shape as ReplyShape>::Out, ConnectorError> {
            ask::<shape::$shape, Self>(self, Request::$Variant { $($f: Param::own($f)),* })
        }
    };
    ([$(#[$doc:meta])*] $Variant:ident $name:ident $shape:ident [$($f:ident : $ty:ty),*]
     [$( $(#[$md:meta])* fn $m:ident($($p:ident : $pt:ty),* $(,)?) => $build:expr; )+]) => {
        $(
            $(#[$md])*
            fn $m(
                &mut self,
                $($p: $pt),*
            ) -> Result<<shape::$shape as ReplyShape>::Out, ConnectorError> {
                ask::<shape::$shape, Self>(self, $build)
            }
        )+
    };
}

/// Declares every verb: see the module's documentation for a field's options.
macro_rules! verbs {
    ($(
        $(#[$doc:meta])*
        $Variant:ident $name:ident -> $shape:ident $(, script $script:literal)? {
            $( $(#[$fm:meta])* $f:ident : $ty:ty $([ $($opt:tt)* ])? ),* $(,)?
        } $(, typed { $($typed:tt)* })?
    )*) => {
        /// One request, exactly as the wire protocol spells it (`cmd` is the tag; `seq` is added on the wire).
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
        #[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
        pub enum Request {
            $( $Variant { $( $(#[$fm])* $f: $ty, )* }, )*
        }

        /// A wire verb without its arguments.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Cmd {
            $( $(#[$doc])* $Variant, )*
        }

        /// Every verb's wire name, in SPEC §5's order.
        pub const NAMES: [&str; COUNT] = [$(stringify!($name)),*];
        /// How many verbs there are.
        pub const COUNT: usize = [$(stringify!($name)),*].len();

        impl Cmd {
            /// Every verb, in SPEC §5's order.
            pub const ALL: [Cmd; COUNT] = [$(Cmd::$Variant),*];

            /// The wire name.
            pub fn name(self) -> &'static str {
                match self { $(Cmd::$Variant => stringify!($name),)* }
            }

            /// Decodes a wire `ok` value into this verb's reply; `Err` names the bad field's
            /// path and the rule it breaks (see [`replies`]).
            pub fn decode_ok(self, ok: Value) -> Result<Reply, String> {
                match self { $(Cmd::$Variant => decode::<shape::$shape>(ok),)* }
            }

            /// The schema of its `ok` value: its reply's wire type, described by `schemars`.
            pub fn ok_schema(self, g: &mut SchemaGenerator) -> Schema {
                match self {
                    $(Cmd::$Variant => g.subschema_for::<<shape::$shape as ReplyShape>::Wire>(),)*
                }
            }

            /// The bundle script it runs (a batch runs `enqueue`), if any: the verbs that mutate.
            pub fn script(self) -> Option<&'static str> {
                match self { $(Cmd::$Variant => None $(.or(Some($script)))?,)* }
            }

            /// The arguments a case file gives it, in wire order, with their defaults.
            pub fn args(self) -> Vec<Arg> {
                match self {
                    $(Cmd::$Variant => [$(case_arg!($f $ty; $($($opt)*)?)),*]
                        .into_iter()
                        .flatten()
                        .collect(),)*
                }
            }
        }

        /// Each verb's fields, borrowed from its [`Request`]: what a [`Handler`] method is given.
        pub mod fields {
            $(
                #[doc = concat!("The fields of `", stringify!($name), "`.")]
                #[derive(Debug, Clone, Copy)]
                pub struct $Variant<'a> { $( pub $f: &'a $ty, )* }
            )*
        }

        /// Something that answers every verb, one method each: the reference connector and the
        /// model. [`Request::handle`] is the one match over the verbs, so a new verb is a
        /// compile error in each handler until it answers it.
        pub trait Handler {
            /// What a verb's method returns.
            type Out;
            $( $(#[$doc])* fn $name(&mut self, args: fields::$Variant<'_>) -> Self::Out; )*
        }

        /// Typed verbs over any [`Connector`]: what gates, cases and the model call. A reply of
        /// the wrong variant is kind `internal`.
        pub trait Verbs: Connector {
            $( typed_methods! {
                [$(#[$doc])*] $Variant $name $shape [$($f: $ty),*] [$($($typed)*)?]
            } )*
        }

        impl<C: Connector + ?Sized> Verbs for C {}

        impl Request {
            /// Hands the request's fields to `h`'s method for its verb.
            pub fn handle<H: Handler + ?Sized>(&self, h: &mut H) -> H::Out {
                match self { $(Self::$Variant { $($f),* } => h.$name(fields::$Variant { $($f),* }),)* }
            }

            /// The session it names (`hello` names none).
            #[allow(unused_variables, reason = "only the session is read")]
            pub fn session(&self) -> Option<&str> {
                match self { $(Self::$Variant { $($f),* } => named_field!(session; $($f $f)*),)* }
                    .map(String::as_str)
            }

            /// The queue it names (a batch: its first; `hello`, `connect` and the probe name none).
            #[allow(unused_variables, reason = "only the queue is read")]
            pub fn queue(&self) -> Option<&str> {
                match self { $(Self::$Variant { $($f),* } => named_field!(queue; $($f $f)*),)* }
                    .map(String::as_str)
            }

            /// The queue it names, to change (a double rewriting it).
            #[allow(unused_variables, reason = "only the queue is read")]
            pub fn queue_mut(&mut self) -> Option<&mut String> {
                match self { $(Self::$Variant { $($f),* } => named_field!(queue; $($f $f)*),)* }
            }

            /// The verb of the request.
            pub fn verb(&self) -> Cmd {
                match self { $(Self::$Variant { .. } => Cmd::$Variant,)* }
            }

            /// Checks the arguments (not the session: that is the connector's state).
            #[allow(unused_variables, reason = "a verb's checks read only some of its fields")]
            pub fn check_args(&self) -> Result<(), ConnectorError> {
                match self {
                    $(Self::$Variant { $($f),* } => {
                        $( field_checks!($f; $($($opt)*)?); )*
                    })*
                }
                Ok(())
            }
        }
    };
}
