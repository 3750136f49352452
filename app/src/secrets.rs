//! The variables capfleet's servers (`capfleet serve`, `capfleet worker`) read as
//! secrets: no agent they start inherits them ([`withhold`]), and a fleet submitted
//! to them cannot sign with them (`crate::fleet`'s submitted fleets name no
//! `secret_env`). An agent inherits the rest of the server's environment.

/// The variables read as secrets: a webhook's signing secret, NATS's token, a
/// client's bearer token, the OTLP exporter's headers (credentials of a collector).
pub(crate) const SECRETS: &[&str] = &[
    "CAPFLEET_NOTIFY_SECRET",
    crate::nats::TOKEN_ENV,
    "CAPFLEET_TOKEN",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
];

/// Withhold [`SECRETS`] and `more` (e.g. a `--notify-secret-env` of another name)
/// from every process spawned from now on.
pub fn withhold(more: &[&str]) {
    capfleet_wire::process::withhold(SECRETS.iter().chain(more).copied());
}
