//! The macro behind `doubles!` (see `table.rs` for what an entry says). It names everything by
//! `$crate::` path, so it expands the same wherever it is invoked.

/// One double's connector, in `make`: its make expression with `$b` bound to the [`Build`]
/// context, or the Python connector with its broken-on-purpose flag.
///
/// [`Build`]: crate::doubles::build::Build
#[cfg(feature = "doubles")]
macro_rules! double_make {
    ($ctx:ident [$b:ident $make:expr] []) => {{
        let $b = &$ctx;
        $make
    }};
    ($ctx:ident [] [$flag:literal]) => {
        $crate::doubles::python_double($flag)
    };
}

/// Where a double is judged beyond its rules' sections, asked of each place (`tls_cluster`:
/// `Double::on_tls_cluster`; `tls_sentinel`: `Double::on_tls_sentinel`); any other word is a
/// compile error.
macro_rules! double_on {
    (tls_cluster, tls_cluster) => {
        true
    };
    (tls_sentinel, tls_sentinel) => {
        true
    };
    (tls_cluster, tls_sentinel) => {
        false
    };
    (tls_sentinel, tls_cluster) => {
        false
    };
}

/// Declares every double, in the order the self-tests run them: the [`Double`] enum, its
/// [`TABLE`] entries, where it is judged, the Python connector's flag of those it plays, and
/// `Double::make`.
///
/// [`Double`]: crate::doubles::Double
/// [`TABLE`]: crate::doubles::TABLE
macro_rules! doubles {
    ($(
        $(#[$doc:meta])*
        $Name:ident = $(python $flag:literal)? $(|$b:ident| $make:expr)? $(, on $on:ident)?,
            breaks $breaks:literal
            $(, also [$($g:ident),* $(,)?])?
            $(, why $why:literal)?;
    )*) => {
        /// One deliberately broken connector.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Double {
            $( $(#[$doc])* $Name, )*
        }

        /// Every double, in the order the self-tests run them.
        pub const TABLE: &[Entry] = &[$(
            Entry {
                double: Double::$Name,
                breaks: $breaks,
                also: &[$($($crate::protocol::gate::GateId::$g),*)?],
                why_also: concat!("" $(, $why)?),
            },
        )*];

        impl Double {
            /// True for a double that only a TLS cluster tells apart (its seed is verified):
            /// judged on `valkey-9.1-tls-cluster`; on a single TLS engine it is the reference.
            pub fn on_tls_cluster(self) -> bool {
                match self {
                    $( Self::$Name => false $(|| double_on!(tls_cluster, $on))?, )*
                }
            }

            /// True for a double that only a TLS Sentinel engine tells apart (its Sentinels are
            /// TLS too): judged on `valkey-9.1-tls-sentinel`; elsewhere it is the reference.
            pub fn on_tls_sentinel(self) -> bool {
                match self {
                    $( Self::$Name => false $(|| double_on!(tls_sentinel, $on))?, )*
                }
            }

            /// The broken-on-purpose flag of the Python connector, for a double it plays.
            pub fn python_flag(self) -> Option<&'static str> {
                match self {
                    $( Self::$Name => None $(.or(Some($flag)))?, )*
                }
            }

            /// A fresh, unconnected instance over `bundle`.
            #[cfg(feature = "doubles")]
            pub fn make(
                self,
                bundle: &$crate::protocol::bundle::Bundle,
            ) -> Box<dyn $crate::connector::Connector + Send> {
                let ctx = $crate::doubles::build::Build { bundle };
                match self {
                    $( Self::$Name => double_make!(ctx [$($b $make)?] [$($flag)?]), )*
                }
            }
        }
    };
}
