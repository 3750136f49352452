//! A fleet whose agents hang (ignoring interrupts and end of input), written to a
//! directory for `capfleet run`: the stop tests (`stop_signals`) and the shutdown
//! bench (`benches/fleet.rs`, which includes this file) share it. Std only.

use std::path::Path;

/// Every agent's turn: say something, then hang (ignoring interrupts and end of input).
const HANG: &str = "[[turn]]\nsteps = [{ say = \"started\" }, { hang = true }]\n";

/// `n` `[[sessions]]` entries `s0`… on the simulator (stream-json), each following
/// the hanging script and carrying the environment variable `key=value`.
pub(crate) fn sim_sessions(n: usize, key: &str, value: &str) -> Vec<String> {
    (0..n)
        .map(|i| {
            format!(
                "[[sessions]]\nname = \"s{i}\"\nagent = \"sim\"\nscript = \"hang.toml\"\nenv = {{ {key} = \"{value}\" }}\n"
            )
        })
        .collect()
}

/// Writes the hanging script (`hang.toml`, which `sessions` name) and `fleet.toml`
/// (fleet `stop`, every session started on task `go`) to `dir`.
pub(crate) fn write_fleet(dir: &Path, sessions: &[String]) {
    std::fs::write(dir.join("hang.toml"), HANG).expect("hang.toml");
    let names: Vec<String> = (0..sessions.len()).map(|i| format!("\"s{i}\"")).collect();
    let fleet = format!(
        "[fleet]\nname = \"stop\"\nstart = [{}]\ntask = \"go\"\n\n{}",
        names.join(", "),
        sessions.join("\n")
    );
    std::fs::write(dir.join("fleet.toml"), fleet).expect("fleet.toml");
}
