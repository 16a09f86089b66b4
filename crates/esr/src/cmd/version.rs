//! `esr version`: prints the version, the git commit and the build date of this binary.
//!
//! The commit and the date are stamped at build time by `build.rs` (`ESR_GIT_COMMIT`,
//! `SOURCE_DATE_EPOCH`). The container image carries the same facts as the OCI labels
//! `org.opencontainers.image.version`, `.revision` and `.created`.

use std::process::ExitCode;

/// Arguments of `esr version`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output format: `text` (one `key: value` line each) or `json`.
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

/// Output format of `esr version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `version: ...`, `commit: ...`, `build date: ...`.
    Text,
    /// `{"version": ..., "commit": ..., "buildDate": ...}`.
    Json,
}

/// The build facts of this binary.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Info {
    /// The crate version (`Cargo.toml`).
    pub version: &'static str,
    /// The git commit the binary was built from, or `unknown`.
    pub commit: &'static str,
    /// The build date, RFC 3339 UTC.
    pub build_date: &'static str,
}

/// The facts stamped into this binary.
pub const INFO: Info = Info {
    version: env!("CARGO_PKG_VERSION"),
    commit: env!("ESR_GIT_COMMIT"),
    build_date: env!("ESR_BUILD_DATE"),
};

/// The text rendering of `info`.
pub fn text(info: &Info) -> String {
    format!(
        "version: {}\ncommit: {}\nbuild date: {}\n",
        info.version, info.commit, info.build_date
    )
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.output {
        Format::Text => print!("{}", text(&INFO)),
        Format::Json => println!("{}", serde_json::to_string(&INFO)?),
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_has_one_line_per_fact() {
        let info = Info {
            version: "1.2.3",
            commit: "abc",
            build_date: "2026-01-02T03:04:05Z",
        };
        assert_eq!(
            text(&info),
            "version: 1.2.3\ncommit: abc\nbuild date: 2026-01-02T03:04:05Z\n"
        );
    }

    #[test]
    fn stamped_facts_are_filled() {
        assert_eq!(INFO.version, env!("CARGO_PKG_VERSION"));
        assert!(!INFO.commit.is_empty());
        assert!(
            chrono::DateTime::parse_from_rfc3339(INFO.build_date).is_ok(),
            "{}",
            INFO.build_date
        );
    }
}
