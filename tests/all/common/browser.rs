//! A real browser: Debian's `chromium`, headless, driven over WebDriver by
//! `chromedriver` (Debian's `chromium-driver`) with the `thirtyfour` client. No
//! browser is ever downloaded: `.ci/run` and `tests/run.sh` install the two packages.
//!
//! chromedriver runs on a free loopback port in a process group of its own, with an
//! environment marker ([`EnvMarker`]) that every chromium process inherits; its
//! temporary profile, `HOME` and `TMPDIR` are a directory of the [`Browser`]. The end
//! ([`Browser::quit`], or the drop after a failure) ends the WebDriver session, kills
//! the group, then whatever still carries the marker (chromium's crash handler leaves
//! the group: it starts its own session), so nothing outlives a test.
//!
//! Screenshots ([`Browser::shot`]) go to [`artifacts_dir`], printed once per browser;
//! a timed-out wait ([`Browser::wait`]) saves one too before the test fails.
//!
//! Shared with the console bench (`benches/console.rs` includes this file and
//! [`procs`](super::procs) by path), so it uses nothing else of `common`.

use std::io::{BufRead as _, BufReader};
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use thirtyfour::{
    By, ChromeCapabilities, ChromiumLikeCapabilities as _, TypingData, WebDriver, WebElement,
};

use super::procs::{EnvMarker, is_alive, kill_group, processes_with_env_marker};

/// The desktop window of the console tests.
pub(crate) const DESKTOP: (u32, u32) = (1280, 800);
/// A phone's viewport (CSS pixels, as an iPhone 12-15 reports it).
pub(crate) const PHONE: (u32, u32) = (390, 844);

/// The browser binary: `$CAPFLEET_CHROMIUM`, else Debian's `/usr/bin/chromium`.
fn chromium() -> String {
    std::env::var("CAPFLEET_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into())
}

/// The driver: `$CAPFLEET_CHROMEDRIVER`, else `chromedriver` on `PATH`.
fn chromedriver() -> String {
    std::env::var("CAPFLEET_CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".into())
}

/// Where screenshots go: `$CAPFLEET_TEST_ARTIFACTS`, else
/// `<cargo target dir>/test-artifacts/console`.
pub(crate) fn artifacts_dir() -> PathBuf {
    std::env::var_os("CAPFLEET_TEST_ARTIFACTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            // Cargo gives integration tests and benches `<target>/tmp`.
            let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
            tmp.parent()
                .unwrap_or(&tmp)
                .join("test-artifacts")
                .join("console")
        })
}

/// A headless chromium under WebDriver; every process of it ends with the value.
pub(crate) struct Browser {
    driver: Option<WebDriver>,
    chromedriver: Child,
    marker: EnvMarker,
    /// The screenshots' file-name prefix (the test's name).
    label: String,
    shots: PathBuf,
    /// `HOME`, `TMPDIR` and the profile of the browser.
    _scratch: tempfile::TempDir,
}

impl Browser {
    /// chromedriver and a headless chromium with a `width`x`height` window;
    /// screenshots named `<label>-<page>.png`.
    pub(crate) async fn start(label: &str, size: (u32, u32)) -> Browser {
        Browser::start_with(label, size, &[]).await
    }

    /// [`Browser::start`] with chromium's arguments `extra` too (e.g.
    /// `--host-resolver-rules=MAP name 127.0.0.1`: a name that resolves to this host).
    pub(crate) async fn start_with(
        label: &str,
        (width, height): (u32, u32),
        extra: &[&str],
    ) -> Browser {
        let scratch = tempfile::tempdir().expect("tempdir");
        let marker = EnvMarker::new("browser");
        let mut chromedriver = Command::new(chromedriver())
            .args(["--port=0", "--log-level=WARNING"])
            .arg(format!(
                "--log-path={}",
                scratch.path().join("chromedriver.log").display()
            ))
            .env(&marker.key, &marker.value)
            .env("HOME", scratch.path())
            .env("TMPDIR", scratch.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "{}: {e} (install Debian's chromium-driver: apt-get install chromium chromium-driver)",
                    chromedriver()
                )
            });
        let port = driver_port(&mut chromedriver);
        let mut caps = ChromeCapabilities::new();
        caps.set_binary(&chromium()).expect("binary");
        for arg in [
            "--headless=new".to_owned(),
            // The tests run as root, where chromium's sandbox cannot start.
            "--no-sandbox".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--disable-gpu".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-extensions".to_owned(),
            "--hide-scrollbars".to_owned(),
            format!("--window-size={width},{height}"),
        ]
        .into_iter()
        .chain(extra.iter().map(|a| (*a).to_owned()))
        {
            caps.add_arg(&arg).expect("arg");
        }
        let mut browser = Browser {
            driver: None,
            chromedriver,
            marker,
            label: label.to_owned(),
            shots: artifacts_dir(),
            _scratch: scratch,
        };
        // thirtyfour's reqwest is the engine's, built with rustls and no provider of
        // its own (plain HTTP here, but a client needs one).
        capfleet_wire::driver::crypto_provider();
        let driver = WebDriver::new(format!("http://127.0.0.1:{port}"), caps)
            .await
            .unwrap_or_else(|e| panic!("a chromium session ({}): {e}", chromium()));
        browser.driver = Some(driver);
        std::fs::create_dir_all(&browser.shots).expect("the artifacts directory");
        eprintln!(
            "browser `{label}`: screenshots in {}",
            browser.shots.display()
        );
        browser
    }

    pub(crate) fn driver(&self) -> &WebDriver {
        self.driver.as_ref().expect("the browser is running")
    }

    /// Open `url` in the current tab.
    pub(crate) async fn open(&self, url: &str) {
        self.driver()
            .goto(url)
            .await
            .unwrap_or_else(|e| panic!("open {url}: {e}"));
    }

    /// Run `script` (a function body: `arguments[i]`, `return …`) in the page; its value.
    pub(crate) async fn js(&self, script: &str, args: Vec<Value>) -> Value {
        self.driver()
            .execute(script, args)
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
            .json()
            .clone()
    }

    /// A Chrome DevTools Protocol command; its result.
    pub(crate) async fn cdp(&self, method: &str, params: Value) -> Value {
        self.driver()
            .cdp()
            .send_raw(method, params)
            .await
            .unwrap_or_else(|e| panic!("CDP {method}: {e}"))
    }

    /// Poll `predicate` (a function body returning a value; falsy: not yet) every 50
    /// ms until it is truthy; its value. Past `timeout` a screenshot
    /// `<label>-timeout-<what>` is saved and the test fails naming `what`.
    pub(crate) async fn wait(&self, what: &str, timeout: Duration, predicate: &str) -> Value {
        let until = Instant::now() + timeout;
        loop {
            let v = self.js(predicate, vec![]).await;
            if truthy(&v) {
                return v;
            }
            if Instant::now() >= until {
                let shot = self
                    .shot(&format!(
                        "timeout-{}",
                        what.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_")
                    ))
                    .await;
                let text = self
                    .js(
                        "return document.body ? document.body.innerText : ''",
                        vec![],
                    )
                    .await;
                panic!(
                    "waited {timeout:?} for {what}; screenshot {}; the page says:\n{}",
                    shot.display(),
                    text.as_str().unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The first element matching `css`, once there is one (10 s at most).
    pub(crate) async fn element(&self, css: &str) -> WebElement {
        self.wait(
            css,
            Duration::from_secs(10),
            &format!("return document.querySelector({}) !== null", js_string(css)),
        )
        .await;
        self.driver()
            .find(By::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css}: {e}"))
    }

    /// How many elements match `css` now.
    pub(crate) async fn count(&self, css: &str) -> usize {
        let n = self
            .js(
                "return document.querySelectorAll(arguments[0]).length",
                vec![Value::from(css)],
            )
            .await;
        n.as_u64().unwrap_or(0) as usize
    }

    /// Keys typed to whatever has the focus (a user at the keyboard).
    pub(crate) async fn press(&self, keys: impl Into<TypingData>) {
        self.driver()
            .action_chain()
            .send_keys(keys)
            .perform()
            .await
            .expect("keys typed");
    }

    /// A screenshot of the viewport as `<label>-<page>.png`; its path.
    pub(crate) async fn shot(&self, page: &str) -> PathBuf {
        let path = self.shots.join(format!("{}-{page}.png", self.label));
        let png = self
            .driver()
            .screenshot_as_png()
            .await
            .unwrap_or_else(|e| panic!("screenshot {page}: {e}"));
        std::fs::write(&path, png).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        path
    }

    /// Emulate a `width`x`height` viewport (CSS pixels, mobile) in the current tab.
    pub(crate) async fn viewport(&self, (width, height): (u32, u32)) {
        self.cdp(
            "Emulation.setDeviceMetricsOverride",
            serde_json::json!({
                "width": width, "height": height, "deviceScaleFactor": 1, "mobile": true
            }),
        )
        .await;
    }

    /// End the session and every process of the browser, and check that none is
    /// left (the drop does the same without the check, after a failure).
    pub(crate) async fn quit(mut self) {
        if let Some(driver) = self.driver.take() {
            driver.quit().await.expect("the WebDriver session ends");
        }
        self.kill();
        let left = processes_with_env_marker(&self.marker.key, &self.marker.value);
        assert!(left.is_empty(), "browser processes left behind: {left:?}");
    }

    /// SIGKILL to chromedriver's group, then to every process with the marker,
    /// until none is alive (5 s at most).
    fn kill(&mut self) {
        kill_group(self.chromedriver.id() as i32);
        let _reaped = self.chromedriver.wait();
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            let left = processes_with_env_marker(&self.marker.key, &self.marker.value);
            if left.is_empty() || Instant::now() >= until {
                return;
            }
            for pid in left.into_iter().filter(|&p| is_alive(p)) {
                // SAFETY: kill(2) on a process this browser started (it carries the marker).
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.kill();
        if let Some(driver) = self.driver.take() {
            // The driver is gone: no session to end over HTTP (thirtyfour's own drop
            // would try, blocking the runtime).
            let _already_quit = driver.leak();
        }
    }
}

/// The port chromedriver says it listens on (`--port=0`: it picks a free one).
fn driver_port(child: &mut Child) -> u16 {
    let out = child.stdout.take().expect("chromedriver's stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("started successfully on port ").nth(1) {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                let _receiver_gone = tx.send(digits.parse::<u16>().ok());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(20))
        .ok()
        .flatten()
        .unwrap_or_else(|| {
            kill_group(child.id() as i32);
            panic!("chromedriver did not say its port within 20 s")
        })
}

/// JavaScript's truthiness of a value a script returned.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// `s` as a JavaScript string literal.
pub(crate) fn js_string(s: &str) -> String {
    Value::from(s).to_string()
}
