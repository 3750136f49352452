//! `capfleet runs --server URL`: a server's runs over its API.

use std::process::ExitCode;

use reqwest::Method;

use capfleet_app::client::{Client, failed, token};
use capfleet_app::style::{ColorChoice, Style};

/// `capfleet runs --server URL`: the server's runs, as `capfleet runs` prints its own.
pub(super) fn runs(server: &str, token_env: &str, json: bool, color: ColorChoice) -> ExitCode {
    let err = Style::for_stderr(color);
    let runtime = match capfleet_app::runtime::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    runtime.block_on(async {
        let client = match Client::new(server, token(token_env)) {
            Ok(c) => c,
            Err(e) => return failed(&e, err),
        };
        let mut runs = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let path = match &after {
                Some(a) => format!("/v1/runs?limit=500&after={a}"),
                None => "/v1/runs?limit=500".to_owned(),
            };
            let page = match client.call(Method::GET, &path, None).await {
                Ok(p) => p,
                Err(e) => return failed(&e, err),
            };
            runs.extend(page["runs"].as_array().cloned().unwrap_or_default());
            match page["next_after"].as_str() {
                Some(a) => after = Some(a.to_owned()),
                None => break,
            }
        }
        if json {
            for r in &runs {
                println!("{r}");
            }
            return ExitCode::SUCCESS;
        }
        println!(
            "{:<24} {:<12} {:>10} {:>8}  {:<10} exit",
            "run", "state", "cost", "sessions", "fleet"
        );
        for r in &runs {
            println!(
                "{:<24} {:<12} {:>10} {:>8}  {:<10} {}",
                r["id"].as_str().unwrap_or(""),
                r["state"].as_str().unwrap_or(""),
                format!("${:.4}", r["budget"]["spent_usd"].as_f64().unwrap_or(0.0)),
                r["sessions"].as_array().map_or(0, Vec::len),
                r["fleet"].as_str().unwrap_or("-"),
                r["exit_code"]
                    .as_u64()
                    .map_or_else(|| "-".to_owned(), |c| c.to_string()),
            );
        }
        ExitCode::SUCCESS
    })
}
