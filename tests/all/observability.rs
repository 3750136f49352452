//! `observability/` checked without Docker: the compose file and Grafana provisioning
//! parse and mount files that exist, `promtool` accepts `prometheus.yml`, every
//! dashboard query names metrics capfleet really exports, and the demo fleet validates.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use capfleet_engine::chaos::SERIES as CHAOS_SERIES;
use capfleet_engine::telemetry::metrics::FleetMetrics;
use serde_json::Value;
use yaml_rust2::{Yaml, YamlLoader};

use crate::common;

/// The series of `capfleet worker --metrics-addr`'s own metrics the dashboard's
/// workers row may query (a real worker's scrape has each: `nats_drain`).
pub(crate) const WORKER_SERIES: &[&str] = &[
    "capfleet_worker_runs_held",
    "capfleet_worker_leases_held",
    "capfleet_worker_queue_depth",
    "capfleet_worker_takeovers_total",
    "capfleet_worker_runs_total",
    "capfleet_worker_lease_renewals_total",
];

fn dir() -> PathBuf {
    common::repo_root().join("observability")
}

fn yaml(path: &Path) -> Yaml {
    let text = std::fs::read_to_string(path).unwrap();
    let mut docs = YamlLoader::load_from_str(&text)
        .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
    assert_eq!(docs.len(), 1, "{}", path.display());
    docs.remove(0)
}

#[test]
fn the_compose_file_runs_jaeger_prometheus_and_grafana_on_files_that_exist() {
    let compose = yaml(&dir().join("docker-compose.yml"));
    let services = &compose["services"];
    for name in ["jaeger", "prometheus", "grafana"] {
        let s = &services[name];
        assert!(
            s["image"].as_str().is_some_and(|i| i.contains(':')),
            "{name} pins an image"
        );
        for v in s["volumes"].as_vec().into_iter().flatten() {
            let host = v.as_str().unwrap().split(':').next().unwrap();
            assert!(
                dir().join(host).exists(),
                "{name} mounts {host}, which exists"
            );
        }
    }
    let ports = |s: &str| -> Vec<String> {
        services[s]["ports"]
            .as_vec()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap().to_owned())
            .collect()
    };
    for p in ["4317:4317", "4318:4318", "16686:16686"] {
        assert!(
            ports("jaeger").contains(&p.to_owned()),
            "jaeger publishes {p}"
        );
    }
    assert!(ports("grafana").contains(&"3000:3000".to_owned()));
}

#[test]
fn grafana_provisions_both_data_sources_and_the_dashboard_folder() {
    let prov = dir().join("grafana/provisioning");
    let ds = yaml(&prov.join("datasources/datasources.yml"));
    let uids: BTreeSet<&str> = ds["datasources"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|d| d["uid"].as_str().unwrap())
        .collect();
    assert_eq!(uids, BTreeSet::from(["jaeger", "prometheus"]));
    let boards = yaml(&prov.join("dashboards/dashboards.yml"));
    let path = boards["providers"][0]["options"]["path"].as_str().unwrap();
    assert_eq!(
        path, "/var/lib/grafana/dashboards",
        "where compose mounts grafana/dashboards"
    );
}

#[test]
fn promtool_accepts_prometheus_yml() {
    let out = Command::new("promtool")
        .args(["check", "config"])
        .arg(dir().join("prometheus.yml"))
        .output()
        .expect("promtool (Debian: apt-get install prometheus; tests/run.sh installs it)");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every `expr` in the dashboard, with its panel's title.
fn queries(dashboard: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in dashboard["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            out.push((
                p["title"].as_str().unwrap().to_owned(),
                t["expr"].as_str().unwrap().to_owned(),
            ));
        }
    }
    out
}

#[test]
fn every_dashboard_query_names_metrics_capfleet_exports() {
    let path = dir().join("grafana/dashboards/capfleet.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .expect("the dashboard is JSON");
    // The run's metrics, and the chaos report's (`chaos report --openmetrics`).
    let exported: BTreeSet<String> = FleetMetrics::default()
        .series_names()
        .iter()
        .cloned()
        .chain(CHAOS_SERIES.iter().map(|s| (*s).to_owned()))
        .chain(WORKER_SERIES.iter().map(|s| (*s).to_owned()))
        .collect();
    let name = regex::Regex::new(r"\bcapfleet_[a-z_]+").unwrap();
    let mut used = BTreeSet::new();
    let qs = queries(&dashboard);
    assert!(qs.len() >= 10, "{qs:?}");
    for (title, expr) in &qs {
        let names: Vec<&str> = name.find_iter(expr).map(|m| m.as_str()).collect();
        assert!(
            !names.is_empty(),
            "panel {title:?} queries no capfleet metric: {expr}"
        );
        for n in names {
            assert!(
                exported.contains(n),
                "panel {title:?} queries {n}, which capfleet does not export ({exported:?})"
            );
            used.insert(n.to_owned());
        }
    }
    // The panels the issue asks for.
    for needed in [
        "capfleet_sessions",
        "capfleet_restarts_total",
        "capfleet_cost_usd_total",
        "capfleet_budget_limit_usd",
        "capfleet_turn_duration_seconds_bucket",
        "capfleet_tokens_total",
        "capfleet_chaos_faults_injected_total",
        "capfleet_chaos_mttr_seconds",
        "capfleet_chaos_invariant_holds",
        "capfleet_worker_runs_held",
        "capfleet_worker_queue_depth",
        "capfleet_worker_takeovers_total",
    ] {
        assert!(used.contains(needed), "the dashboard shows {needed}");
    }
    // The session panel links to the session's trace in Jaeger.
    let text = dashboard.to_string();
    assert!(text.contains("localhost:16686/search?service=capfleet"));
    assert!(text.contains("cap.session.urn"));
}

#[test]
fn the_observability_demo_fleet_validates() {
    let out = crate::common::succeeded(
        Command::new(common::BIN)
            .args(["run", "--dry-run"])
            .arg(dir().join("demo-fleet.toml"))
            .env("NO_COLOR", "1")
            .output()
            .unwrap(),
    );
    let plan = String::from_utf8_lossy(&out.stdout);
    for s in ["api", "db", "ui", "flaky", "reviewer"] {
        assert!(plan.contains(&format!("cap://watch/{s}")), "{plan}");
    }
}
