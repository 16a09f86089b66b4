//! The ESO controller flags beyond esr's own (ESO v2.9–v2.14's `external-secrets` command), so
//! that ESO's Deployment arguments start esr unchanged.
//!
//! - Implemented: the `--zap-*` logging family (mapped onto `--loglevel`/`--log-format` and the
//!   timestamp format), the leader election timings, `--enable-secret-store-reconciler` and
//!   `--unsafe-allow-generic-targets`.
//! - Accepted with a one-line warning at start (only when given): the flags for things esr does
//!   differently or not at all (metrics TLS, client caches, provider caches of providers esr does
//!   not serve, extended metric labels, v2 providers). docs/cli.md lists each one.
//!
//! Flags outside ESO's set are still rejected by the parser.

use std::fmt::Write as _;
use std::time::Duration;

use chrono::{DateTime, Utc};
use esr_controller::leader::{LeaseTimings, LeaseTimingsError};

/// A boolean flag value as Go's `strconv.ParseBool` (pflag) reads it.
#[derive(Debug, thiserror::Error)]
#[error("invalid boolean value {0:?}")]
pub struct GoBoolError(String);

/// Parses `1`, `t`, `T`, `TRUE`, `true`, `True`, `0`, `f`, `F`, `FALSE`, `false`, `False`.
pub fn go_bool(s: &str) -> Result<bool, GoBoolError> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        other => Err(GoBoolError(other.to_string())),
    }
}

/// `--zap-time-encoding`: how log timestamps are written (zap's `TimeEncoder`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimeEncoding {
    /// Seconds since the Unix epoch as a decimal (`1767225600.123456789`).
    #[default]
    Epoch,
    /// Milliseconds since the epoch as a decimal.
    Millis,
    /// Nanoseconds since the epoch, an integer.
    Nanos,
    /// `2006-01-02T15:04:05.000Z0700`.
    Iso8601,
    /// `2006-01-02T15:04:05Z07:00`.
    Rfc3339,
    /// RFC 3339 with nanoseconds, trailing zeros trimmed.
    Rfc3339Nano,
}

impl TimeEncoding {
    /// zap's `TimeEncoder.UnmarshalText`: the listed spellings, anything else is `epoch`. `nano`
    /// (the spelling of ESO's flag help) is read as `nanos`.
    pub fn parse(s: &str) -> Self {
        match s {
            "rfc3339nano" | "RFC3339Nano" => TimeEncoding::Rfc3339Nano,
            "rfc3339" | "RFC3339" => TimeEncoding::Rfc3339,
            "iso8601" | "ISO8601" => TimeEncoding::Iso8601,
            "millis" => TimeEncoding::Millis,
            "nanos" | "nano" => TimeEncoding::Nanos,
            _ => TimeEncoding::Epoch,
        }
    }

    /// Formats `t` (UTC).
    pub fn format(self, t: DateTime<Utc>) -> String {
        let secs = t.timestamp();
        let nanos = t.timestamp_subsec_nanos();
        let trimmed = |n: u32, width: usize| -> String {
            let s = format!("{n:0width$}");
            s.trim_end_matches('0').to_string()
        };
        match self {
            TimeEncoding::Epoch => {
                let frac = trimmed(nanos, 9);
                if frac.is_empty() {
                    secs.to_string()
                } else {
                    format!("{secs}.{frac}")
                }
            }
            TimeEncoding::Millis => {
                let ms = t.timestamp_millis();
                let frac = trimmed(nanos % 1_000_000, 6);
                if frac.is_empty() {
                    ms.to_string()
                } else {
                    format!("{ms}.{frac}")
                }
            }
            TimeEncoding::Nanos => t
                .timestamp_nanos_opt()
                .map(|n| n.to_string())
                .unwrap_or_else(|| secs.to_string()),
            TimeEncoding::Iso8601 => t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
            TimeEncoding::Rfc3339 => t.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
            TimeEncoding::Rfc3339Nano => {
                let mut s = t.format("%Y-%m-%dT%H:%M:%S").to_string();
                let frac = trimmed(nanos, 9);
                if !frac.is_empty() {
                    let _ = write!(s, ".{frac}");
                }
                s.push('Z');
                s
            }
        }
    }
}

impl tracing_subscriber::fmt::time::FormatTime for TimeEncoding {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        w.write_str(&self.format(Utc::now()))
    }
}

/// Log format.
#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object per line.
    Json,
    /// Human-readable text.
    Text,
}

/// The ESO controller flags esr implements or accepts beyond its own (flattened into
/// `esr controller`'s arguments).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Compat {
    /// Log timestamp format: epoch, millis, nano, iso8601, rfc3339 or rfc3339nano (zap's
    /// spellings; anything else is epoch).
    #[arg(long, default_value = "epoch")]
    pub zap_time_encoding: String,
    /// Log level (debug, info, warn, error, dpanic, panic, fatal, or an integer > 0 for more
    /// verbose debug levels). Overrides --loglevel when given.
    #[arg(long)]
    pub zap_log_level: Option<String>,
    /// Log encoder: json or console (console is --log-format=text). --log-format wins when both
    /// are given.
    #[arg(long, value_parser = ["json", "console"])]
    pub zap_encoder: Option<String>,
    /// Development logging: console encoder and debug level unless set otherwise.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool)]
    pub zap_devel: Option<bool>,
    /// Accepted; esr writes no stack traces into logs.
    #[arg(long)]
    pub zap_stacktrace_level: Option<String>,

    /// How long a leader's Lease is valid without renewal (Go duration).
    #[arg(long, default_value = "15s")]
    pub leader_election_lease_duration: String,
    /// How long the leader keeps retrying to renew before it gives up leadership.
    #[arg(long, default_value = "10s")]
    pub leader_election_renew_deadline: String,
    /// Pause between leader election attempts.
    #[arg(long, default_value = "2s")]
    pub leader_election_retry_period: String,

    /// Reconcile SecretStores (their Ready condition and capabilities). ExternalSecrets and
    /// PushSecrets using SecretStores are reconciled either way, as in ESO.
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    pub enable_secret_store_reconciler: bool,
    /// Allow ExternalSecrets with `target.manifest` (generic targets). esr refuses generic
    /// targets either way; without this flag it reports ESO's condition.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    pub unsafe_allow_generic_targets: bool,

    // ---- accepted with a warning ----
    /// Accepted; esr serves /metrics over plain HTTP.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool)]
    pub metrics_secure: Option<bool>,
    /// Accepted; esr does not authenticate /metrics.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool)]
    pub metrics_auth: Option<bool>,
    /// Accepted (metrics TLS).
    #[arg(long)]
    pub metrics_cert_dir: Option<String>,
    /// Accepted (metrics TLS).
    #[arg(long)]
    pub metrics_cert_name: Option<String>,
    /// Accepted (metrics TLS).
    #[arg(long)]
    pub metrics_key_name: Option<String>,
    /// Accepted (metrics TLS).
    #[arg(long)]
    pub tls_ciphers: Option<String>,
    /// Accepted (metrics TLS).
    #[arg(long)]
    pub tls_min_version: Option<String>,
    /// Accepted (metrics TLS).
    #[arg(long)]
    pub tls_curve_preferences: Option<String>,
    /// Accepted; esr's metrics and probe servers speak HTTP/1.1.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool)]
    pub enable_http2: Option<bool>,
    /// Accepted; esr reads Secrets directly from the API server.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool)]
    pub enable_secrets_caching: Option<bool>,
    /// Accepted; esr reads ConfigMaps directly from the API server.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool)]
    pub enable_configmaps_caching: Option<bool>,
    /// Accepted; esr keeps a metadata-only cache of managed Secrets in any case.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool)]
    pub enable_managed_secrets_caching: Option<bool>,
    /// Accepted; esr reads the target Secret from the API server in any case.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool)]
    pub enable_secret_api_read_on_cache_mismatch: Option<bool>,
    /// Accepted (ESO's partial-metadata cache).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool)]
    pub enable_partial_cache: Option<bool>,
    /// Accepted; esr's metric labels are ESO's default labels.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool)]
    pub enable_extended_metric_labels: Option<bool>,
    /// Accepted; esr has no v2 (out-of-process) providers.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool)]
    pub enable_v2_providers: Option<bool>,
    /// Template left delimiter; esr's templates always use `{{`.
    #[arg(long)]
    pub template_left_delimiter: Option<String>,
    /// Template right delimiter; esr's templates always use `}}`.
    #[arg(long)]
    pub template_right_delimiter: Option<String>,
    /// Accepted; esr logs in to Vault per client.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool)]
    pub enable_vault_token_cache: Option<bool>,
    /// Accepted (Vault token cache size).
    #[arg(long)]
    pub vault_token_cache_size: Option<String>,
    /// Accepted; deprecated alias of --enable-vault-token-cache.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool)]
    pub experimental_enable_vault_token_cache: Option<bool>,
    /// Accepted; deprecated alias of --vault-token-cache-size.
    #[arg(long)]
    pub experimental_vault_token_cache_size: Option<String>,
    /// Accepted; ESO no longer uses it either.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool)]
    pub experimental_enable_aws_session_cache: Option<bool>,
    /// Accepted; esr does not serve Doppler.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = go_bool)]
    pub experimental_enable_doppler_oidc_cache: Option<bool>,
    /// Accepted; esr does not serve Doppler.
    #[arg(long)]
    pub experimental_doppler_oidc_cache_size: Option<String>,
    /// Accepted; esr does not serve Doppler.
    #[arg(long)]
    pub doppler_etag_cache_size: Option<String>,
    /// Accepted; esr does not serve Nebius MysteryBox.
    #[arg(long)]
    pub mysterybox_tokens_cache_size: Option<String>,
    /// Accepted; esr does not serve Nebius MysteryBox.
    #[arg(long)]
    pub mysterybox_connections_cache_size: Option<String>,
    /// Accepted; esr does not serve Pulumi ESC.
    #[arg(long)]
    pub pulumi_oidc_cache_size: Option<String>,
}

/// A bad flag value.
#[derive(Debug, thiserror::Error)]
pub enum FlagError {
    /// Not a Go duration.
    #[error("invalid --{flag} {value:?}: not a duration")]
    Duration {
        /// Flag name.
        flag: &'static str,
        /// Value.
        value: String,
    },
    /// Timings client-go refuses.
    #[error("invalid leader election timings: {0}")]
    Lease(#[from] LeaseTimingsError),
}

fn duration(flag: &'static str, value: &str) -> Result<Duration, FlagError> {
    esr_api::duration::parse(value)
        .ok()
        .and_then(|d| d.to_std())
        .ok_or_else(|| FlagError::Duration {
            flag,
            value: value.to_string(),
        })
}

impl Compat {
    /// The leader election timings.
    pub fn lease_timings(&self) -> Result<LeaseTimings, FlagError> {
        Ok(LeaseTimings::new(
            duration(
                "leader-election-lease-duration",
                &self.leader_election_lease_duration,
            )?,
            duration(
                "leader-election-renew-deadline",
                &self.leader_election_renew_deadline,
            )?,
            duration(
                "leader-election-retry-period",
                &self.leader_election_retry_period,
            )?,
        )?)
    }

    /// One warning per given flag that esr accepts without acting on it.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut given = |flag: &str, set: bool, why: &str| {
            if set {
                out.push(format!(
                    "--{flag} is accepted for ESO compatibility and has no effect: {why}"
                ));
            }
        };
        given(
            "zap-stacktrace-level",
            self.zap_stacktrace_level.is_some(),
            "esr writes no stack traces into logs",
        );
        let tls = "esr serves /metrics over plain HTTP without authentication";
        given("metrics-secure", self.metrics_secure.is_some(), tls);
        given("metrics-auth", self.metrics_auth.is_some(), tls);
        given("metrics-cert-dir", self.metrics_cert_dir.is_some(), tls);
        given("metrics-cert-name", self.metrics_cert_name.is_some(), tls);
        given("metrics-key-name", self.metrics_key_name.is_some(), tls);
        given("tls-ciphers", self.tls_ciphers.is_some(), tls);
        given("tls-min-version", self.tls_min_version.is_some(), tls);
        given(
            "tls-curve-preferences",
            self.tls_curve_preferences.is_some(),
            tls,
        );
        given(
            "enable-http2",
            self.enable_http2.is_some(),
            "esr's metrics and probe servers speak HTTP/1.1",
        );
        let cache = "esr reads Secrets and ConfigMaps from the API server and caches only the metadata of managed Secrets";
        given(
            "enable-secrets-caching",
            self.enable_secrets_caching.is_some(),
            cache,
        );
        given(
            "enable-configmaps-caching",
            self.enable_configmaps_caching.is_some(),
            cache,
        );
        given(
            "enable-managed-secrets-caching",
            self.enable_managed_secrets_caching.is_some(),
            cache,
        );
        given(
            "enable-secret-api-read-on-cache-mismatch",
            self.enable_secret_api_read_on_cache_mismatch.is_some(),
            cache,
        );
        given(
            "enable-partial-cache",
            self.enable_partial_cache.is_some(),
            cache,
        );
        given(
            "enable-extended-metric-labels",
            self.enable_extended_metric_labels.is_some(),
            "esr's metrics carry ESO's default labels",
        );
        given(
            "enable-v2-providers",
            self.enable_v2_providers.is_some(),
            "esr has no out-of-process providers",
        );
        given(
            "template-left-delimiter",
            self.template_left_delimiter
                .as_deref()
                .is_some_and(|d| d != "{{"),
            "esr's templates always use {{",
        );
        given(
            "template-right-delimiter",
            self.template_right_delimiter
                .as_deref()
                .is_some_and(|d| d != "}}"),
            "esr's templates always use }}",
        );
        let vault = "esr logs in to Vault once per store client and keeps no token cache";
        given(
            "enable-vault-token-cache",
            self.enable_vault_token_cache.is_some(),
            vault,
        );
        given(
            "vault-token-cache-size",
            self.vault_token_cache_size.is_some(),
            vault,
        );
        given(
            "experimental-enable-vault-token-cache",
            self.experimental_enable_vault_token_cache.is_some(),
            vault,
        );
        given(
            "experimental-vault-token-cache-size",
            self.experimental_vault_token_cache_size.is_some(),
            vault,
        );
        given(
            "experimental-enable-aws-session-cache",
            self.experimental_enable_aws_session_cache.is_some(),
            "ESO no longer reads it either",
        );
        let absent = "esr does not serve this provider";
        given(
            "experimental-enable-doppler-oidc-cache",
            self.experimental_enable_doppler_oidc_cache.is_some(),
            absent,
        );
        given(
            "experimental-doppler-oidc-cache-size",
            self.experimental_doppler_oidc_cache_size.is_some(),
            absent,
        );
        given(
            "doppler-etag-cache-size",
            self.doppler_etag_cache_size.is_some(),
            absent,
        );
        given(
            "mysterybox-tokens-cache-size",
            self.mysterybox_tokens_cache_size.is_some(),
            absent,
        );
        given(
            "mysterybox-connections-cache-size",
            self.mysterybox_connections_cache_size.is_some(),
            absent,
        );
        given(
            "pulumi-oidc-cache-size",
            self.pulumi_oidc_cache_size.is_some(),
            absent,
        );
        out
    }
}

/// The logging setup resolved from `--loglevel`, `--log-format` and the `--zap-*` flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSettings {
    /// A tracing filter.
    pub filter: String,
    /// Output format.
    pub format: LogFormat,
    /// Timestamp format.
    pub time: TimeEncoding,
}

/// A zap level (or esr's tracing filter) as a tracing filter: `dpanic`, `panic` and `fatal` are
/// `error`; an integer `n > 0` (a zap debug verbosity) is `debug` for 1 and `trace` above.
pub fn tracing_filter(level: &str) -> String {
    match level {
        "dpanic" | "panic" | "fatal" => "error".to_string(),
        l => match l.parse::<i64>() {
            Ok(n) if n >= 2 => "trace".to_string(),
            Ok(1) => "debug".to_string(),
            Ok(_) => "info".to_string(),
            Err(_) => l.to_string(),
        },
    }
}

/// Resolves the logging flags: `--zap-log-level` over `--loglevel` (with `--zap-devel`, debug
/// unless a level was given); `--log-format` over `--zap-encoder` over `--zap-devel` (console)
/// over JSON.
pub fn log_settings(
    loglevel: &str,
    loglevel_given: bool,
    log_format: Option<LogFormat>,
    c: &Compat,
) -> LogSettings {
    let devel = c.zap_devel == Some(true);
    let level = match (&c.zap_log_level, loglevel_given, devel) {
        (Some(l), _, _) => l.clone(),
        (None, false, true) => "debug".to_string(),
        (None, _, _) => loglevel.to_string(),
    };
    let format = log_format
        .or(match c.zap_encoder.as_deref() {
            Some("console") => Some(LogFormat::Text),
            Some(_) => Some(LogFormat::Json),
            None => None,
        })
        .unwrap_or(if devel {
            LogFormat::Text
        } else {
            LogFormat::Json
        });
    LogSettings {
        filter: tracing_filter(&level),
        format,
        time: TimeEncoding::parse(&c.zap_time_encoding),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn time_encodings_follow_zap() {
        let t = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap()
            + chrono::Duration::nanoseconds(120_000_000);
        let secs = t.timestamp();
        assert_eq!(TimeEncoding::parse("epoch").format(t), format!("{secs}.12"));
        assert_eq!(
            TimeEncoding::parse("millis").format(t),
            format!("{}", secs * 1000 + 120)
        );
        assert_eq!(
            TimeEncoding::parse("nano").format(t),
            format!("{}", secs as i128 * 1_000_000_000 + 120_000_000)
        );
        assert_eq!(
            TimeEncoding::parse("iso8601").format(t),
            "2026-01-02T03:04:05.120Z"
        );
        assert_eq!(
            TimeEncoding::parse("rfc3339").format(t),
            "2026-01-02T03:04:05Z"
        );
        assert_eq!(
            TimeEncoding::parse("RFC3339Nano").format(t),
            "2026-01-02T03:04:05.12Z"
        );
        // zap reads any other spelling as epoch.
        assert_eq!(TimeEncoding::parse("bogus"), TimeEncoding::Epoch);
        let whole = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
        assert_eq!(TimeEncoding::Epoch.format(whole), secs.to_string());
    }

    #[test]
    fn zap_flags_map_onto_esr_logging() {
        let c = Compat {
            zap_time_encoding: "rfc3339".into(),
            ..Default::default()
        };
        assert_eq!(
            log_settings("info", false, None, &c),
            LogSettings {
                filter: "info".into(),
                format: LogFormat::Json,
                time: TimeEncoding::Rfc3339
            }
        );
        let devel = Compat {
            zap_devel: Some(true),
            ..Default::default()
        };
        let s = log_settings("info", false, None, &devel);
        assert_eq!((s.filter.as_str(), s.format), ("debug", LogFormat::Text));
        // An explicit --loglevel and --log-format win over --zap-devel.
        let s = log_settings("warn", true, Some(LogFormat::Json), &devel);
        assert_eq!((s.filter.as_str(), s.format), ("warn", LogFormat::Json));
        let zap = Compat {
            zap_log_level: Some("fatal".into()),
            zap_encoder: Some("console".into()),
            ..Default::default()
        };
        let s = log_settings("debug", true, None, &zap);
        assert_eq!((s.filter.as_str(), s.format), ("error", LogFormat::Text));
        assert_eq!(tracing_filter("3"), "trace");
        assert_eq!(tracing_filter("1"), "debug");
        assert_eq!(tracing_filter("esr=debug"), "esr=debug");
    }

    #[test]
    fn go_bools_and_warnings() {
        assert!(go_bool("T").unwrap() && !go_bool("0").unwrap());
        assert!(go_bool("yes").is_err());
        assert!(Compat::default().warnings().is_empty());
        let c = Compat {
            metrics_secure: Some(true),
            enable_secrets_caching: Some(false),
            template_left_delimiter: Some("{{".into()),
            template_right_delimiter: Some("]]".into()),
            ..Default::default()
        };
        let w = c.warnings();
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(w[0].starts_with("--metrics-secure is accepted"));
        assert!(w[2].starts_with("--template-right-delimiter"));
    }

    #[test]
    fn lease_timings_from_flags() {
        let mut c = Compat {
            leader_election_lease_duration: "15s".into(),
            leader_election_renew_deadline: "10s".into(),
            leader_election_retry_period: "2s".into(),
            ..Default::default()
        };
        assert_eq!(
            c.lease_timings().unwrap().lease_duration,
            Duration::from_secs(15)
        );
        c.leader_election_lease_duration = "1m".into();
        c.leader_election_renew_deadline = "40s".into();
        let t = c.lease_timings().unwrap();
        assert_eq!(
            (t.lease_duration, t.renew_deadline),
            (Duration::from_secs(60), Duration::from_secs(40))
        );
        c.leader_election_renew_deadline = "2m".into();
        assert!(matches!(c.lease_timings(), Err(FlagError::Lease(_))));
        c.leader_election_retry_period = "soon".into();
        assert!(matches!(c.lease_timings(), Err(FlagError::Duration { .. })));
    }
}
