//! The Valkey the harness pins, spelt once: the default image, `ci/provision`'s build directory
//! and the help text are all named from it, so moving to a new Valkey is one edit here (and
//! `ci/provision`'s own pin, which builds it).

/// The pinned Valkey version as a literal, for `concat!` (a `const &str` cannot be joined at
/// compile time, and clap's defaults and the help text want `&'static str`).
macro_rules! valkey {
    () => {
        "9.1.2"
    };
}
pub(crate) use valkey;

/// The pinned Valkey version.
pub const VALKEY: &str = valkey!();

/// The pinned default image; `ci/provision` builds it locally when no registry answers.
pub const DEFAULT_IMAGE: &str = concat!("valkey/valkey:", valkey!());

/// The directory under `ci/provision`'s cache that holds the pinned build (`bin/valkey-server`,
/// `bin/valkey-benchmark`).
pub const BUILD_DIR: &str = concat!("valkey-", valkey!());

#[cfg(test)]
mod tests {
    #[test]
    fn the_image_and_the_build_name_the_one_version() {
        assert_eq!(
            super::DEFAULT_IMAGE,
            format!("valkey/valkey:{}", super::VALKEY)
        );
        assert_eq!(super::BUILD_DIR, format!("valkey-{}", super::VALKEY));
    }
}
