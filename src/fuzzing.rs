//! The decoders of untrusted input the fuzz crate (`capfleet-fuzz`) drives; not an
//! API. Each is a plain function over the app's private code, the way the app reads
//! that input, returning what the fuzz targets check: rendered findings, accepted
//! names, an error's message.

use capfleet_app::fleet;
/// The body of a `POST /v1/runs` sent with a content type, read as the server reads it.
pub use capfleet_server::fuzzing::serve_body;

/// A fleet.toml (`src`, named `origin` in every finding) read and validated as `run`,
/// `run --dry-run` and the server do before anything it names is looked for on disk:
/// every error then every warning, rendered as they print them; the error when the
/// text is not TOML.
pub fn fleet_toml(origin: &str, src: &str) -> Result<Vec<String>, String> {
    match fleet::check(origin, src) {
        Ok(checked) => Ok(checked
            .errors
            .iter()
            .map(ToString::to_string)
            .chain(checked.warnings.iter().map(ToString::to_string))
            .collect()),
        Err(errors) => Err(errors.to_string()),
    }
}
