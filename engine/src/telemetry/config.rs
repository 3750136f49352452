//! Where spans go, decided the way OpenTelemetry users expect: `--otlp <url>` first,
//! then the standard `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT`,
//! the protocol from `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL` (`http/protobuf` by default,
//! or `grpc`); `OTEL_TRACES_EXPORTER=none` and `OTEL_SDK_DISABLED=true` turn OTLP off.
//! With no endpoint anywhere nothing is exported (and nothing is set up).

use std::path::PathBuf;

/// What the command line says about traces.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceConfig {
    /// `--otlp <url>`: the OTLP endpoint, over the environment's.
    pub otlp: Option<String>,
    /// `--trace-file <path>`: finished spans as JSON lines.
    pub trace_file: Option<PathBuf>,
}

/// The OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/gRPC (default port 4317).
    Grpc,
    /// OTLP over HTTP with protobuf bodies (default port 4318), the spec's default.
    HttpProtobuf,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Grpc => "grpc",
            Protocol::HttpProtobuf => "http/protobuf",
        }
    }
}

/// Where and how to send spans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpTarget {
    /// The full URL: for HTTP, the traces path (`/v1/traces`) included.
    pub endpoint: String,
    pub protocol: Protocol,
}

/// A telemetry setting that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TelemetryError {
    #[error("{source_name}={value}: {reason}")]
    Setting {
        /// The flag or variable (`--otlp`, `OTEL_EXPORTER_OTLP_PROTOCOL`, …).
        source_name: String,
        value: String,
        reason: String,
    },
    #[error("cannot set up the OTLP exporter: {0}")]
    Exporter(String),
    #[error("cannot write the trace file {path}: {reason}")]
    TraceFile { path: String, reason: String },
}

pub(crate) const ENV_TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
pub(crate) const ENV_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
pub(crate) const ENV_TRACES_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
pub(crate) const ENV_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
pub(crate) const ENV_TRACES_EXPORTER: &str = "OTEL_TRACES_EXPORTER";
pub(crate) const ENV_SDK_DISABLED: &str = "OTEL_SDK_DISABLED";
pub const ENV_SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
pub const ENV_RESOURCE_ATTRIBUTES: &str = "OTEL_RESOURCE_ATTRIBUTES";
pub(crate) const ENV_BSP_MAX_QUEUE_SIZE: &str = "OTEL_BSP_MAX_QUEUE_SIZE";

/// The batch queue's default size (the SDK's).
pub(crate) const DEFAULT_QUEUE_SIZE: usize = 2048;

fn setting(source: &str, value: &str, reason: impl Into<String>) -> TelemetryError {
    TelemetryError::Setting {
        source_name: source.into(),
        value: value.into(),
        reason: reason.into(),
    }
}

impl TraceConfig {
    /// The OTLP target, if any, reading variables through `env`.
    pub fn otlp_target(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<OtlpTarget>, TelemetryError> {
        let env = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        if self.otlp.is_none() {
            if env(ENV_SDK_DISABLED).is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
                return Ok(None);
            }
            match env(ENV_TRACES_EXPORTER).as_deref().map(str::trim) {
                None | Some("otlp") => {}
                Some("none") => return Ok(None),
                Some(other) => {
                    return Err(setting(
                        ENV_TRACES_EXPORTER,
                        other,
                        "capfleet exports `otlp` (or `none`)",
                    ));
                }
            }
        }
        let protocol = match [ENV_TRACES_PROTOCOL, ENV_PROTOCOL]
            .into_iter()
            .find_map(|k| env(k).map(|v| (k, v)))
        {
            None => Protocol::HttpProtobuf,
            Some((k, v)) => match v.trim() {
                "grpc" => Protocol::Grpc,
                "http/protobuf" => Protocol::HttpProtobuf,
                "http/json" => {
                    return Err(setting(
                        k,
                        &v,
                        "not in this build: use `http/protobuf` or `grpc`",
                    ));
                }
                _ => return Err(setting(k, &v, "expected `http/protobuf` or `grpc`")),
            },
        };
        // (source, url, is the URL the traces endpoint itself)
        let found = match &self.otlp {
            Some(url) => Some(("--otlp".to_owned(), url.clone(), false)),
            None => env(ENV_TRACES_ENDPOINT)
                .map(|u| (ENV_TRACES_ENDPOINT.to_owned(), u, true))
                .or_else(|| env(ENV_ENDPOINT).map(|u| (ENV_ENDPOINT.to_owned(), u, false))),
        };
        let Some((source, url, exact)) = found else {
            return Ok(None);
        };
        let url = url.trim().to_owned();
        check_url(&source, &url)?;
        let endpoint = match protocol {
            Protocol::HttpProtobuf
                if !exact && !url.trim_end_matches('/').ends_with("/v1/traces") =>
            {
                format!("{}/v1/traces", url.trim_end_matches('/'))
            }
            _ => url,
        };
        Ok(Some(OtlpTarget { endpoint, protocol }))
    }
}

/// `http://host[:port][/path]`; TLS is not in this build.
fn check_url(source: &str, url: &str) -> Result<(), TelemetryError> {
    let rest = if let Some(rest) = url.strip_prefix("http://") {
        rest
    } else if url.starts_with("https://") {
        return Err(setting(
            source,
            url,
            "TLS is not in this build: send to a local collector over http://",
        ));
    } else {
        return Err(setting(
            source,
            url,
            "expected an http:// URL, e.g. http://127.0.0.1:4318",
        ));
    };
    let authority = rest.split('/').next().unwrap_or("");
    let (host, port) = match authority.strip_prefix('[') {
        // [v6]:port
        Some(v6) => match v6.split_once(']') {
            Some((h, rest)) => (h, rest.strip_prefix(':')),
            None => ("", None),
        },
        None => match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        },
    };
    if host.is_empty() {
        return Err(setting(source, url, "the URL names no host"));
    }
    if let Some(p) = port
        && p.parse::<u16>().is_err()
    {
        return Err(setting(source, url, format!("`{p}` is not a port")));
    }
    Ok(())
}

/// The batch queue size: `OTEL_BSP_MAX_QUEUE_SIZE` or the SDK's default.
pub fn queue_size(env: impl Fn(&str) -> Option<String>) -> usize {
    env(ENV_BSP_MAX_QUEUE_SIZE)
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_QUEUE_SIZE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(
        flag: Option<&str>,
        vars: &[(&str, &str)],
    ) -> Result<Option<OtlpTarget>, TelemetryError> {
        let cfg = TraceConfig {
            otlp: flag.map(str::to_owned),
            trace_file: None,
        };
        cfg.otlp_target(|k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn nothing_configured_is_no_exporter() {
        assert_eq!(target(None, &[]), Ok(None));
        assert_eq!(target(None, &[(ENV_ENDPOINT, "  ")]), Ok(None));
    }

    #[test]
    fn http_gets_the_traces_path_unless_the_traces_variable_names_it() {
        let t = target(Some("http://127.0.0.1:4318"), &[]).unwrap().unwrap();
        assert_eq!(t.endpoint, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(t.protocol, Protocol::HttpProtobuf);
        let t = target(None, &[(ENV_ENDPOINT, "http://c:4318/")])
            .unwrap()
            .unwrap();
        assert_eq!(t.endpoint, "http://c:4318/v1/traces");
        let t = target(None, &[(ENV_TRACES_ENDPOINT, "http://c:4318/custom")])
            .unwrap()
            .unwrap();
        assert_eq!(t.endpoint, "http://c:4318/custom");
    }

    #[test]
    fn the_flag_beats_the_environment_and_grpc_keeps_the_url() {
        let vars = [
            (ENV_ENDPOINT, "http://env:4317"),
            (ENV_PROTOCOL, "grpc"),
            (ENV_TRACES_EXPORTER, "none"),
        ];
        let t = target(Some("http://flag:4317"), &vars).unwrap().unwrap();
        assert_eq!(t.endpoint, "http://flag:4317");
        assert_eq!(t.protocol, Protocol::Grpc);
        assert_eq!(target(None, &vars), Ok(None));
        let off = [
            (ENV_ENDPOINT, "http://env:4317"),
            (ENV_SDK_DISABLED, "TRUE"),
        ];
        assert_eq!(target(None, &off), Ok(None));
    }

    #[test]
    fn bad_settings_name_the_setting_and_the_fix() {
        let e = target(Some("https://x:4318"), &[]).unwrap_err().to_string();
        assert!(e.starts_with("--otlp=https://x:4318: TLS"), "{e}");
        let e = target(Some("localhost:4318"), &[]).unwrap_err().to_string();
        assert!(e.contains("expected an http:// URL"), "{e}");
        assert!(target(Some("http://[::1]:4317"), &[]).is_ok());
        let e = target(Some("http://h:99999"), &[]).unwrap_err().to_string();
        assert!(e.contains("`99999` is not a port"), "{e}");
        let e = target(Some("http://h"), &[(ENV_PROTOCOL, "http/json")])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("OTEL_EXPORTER_OTLP_PROTOCOL=http/json: not in this build"),
            "{e}"
        );
        let e = target(None, &[(ENV_TRACES_EXPORTER, "zipkin")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("capfleet exports `otlp`"), "{e}");
    }

    #[test]
    fn queue_size_reads_the_sdk_variable() {
        assert_eq!(queue_size(|_| None), DEFAULT_QUEUE_SIZE);
        assert_eq!(queue_size(|_| Some("16".into())), 16);
        assert_eq!(queue_size(|_| Some("zero".into())), DEFAULT_QUEUE_SIZE);
    }
}
