//! Headless Chromium for dashboard tests: finds Debian's `chromium` and `chromedriver` (or
//! `ODAC_CHROMIUM` / `ODAC_CHROMEDRIVER`), starts `chromedriver` on a free loopback port in its
//! own process group, opens a WebDriver session through fantoccini over plain HTTP (fixed window
//! size, a throw-away profile, test-CA certificate errors ignored by this browser only), and
//! polls the page with deadlines. Dropping [`Driver`] ends the session's processes.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::wd::Capabilities;
use fantoccini::{Client, ClientBuilder, Locator};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Window size of the test browser (CSS pixels).
pub const WINDOW: (u32, u32) = (1440, 1000);

/// The first executable named `names` on `PATH`, or the path in env `var`.
fn find_exe(var: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(var).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|d| names.iter().map(move |n| d.join(n)))
        .find(|p| p.is_file())
}

/// Chromium and chromedriver for the test `test`, or `None` when they are missing and the
/// developer opted out with `ODAC_ALLOW_SKIP=1` (a skip line is printed); fails otherwise, and
/// also under `ODAC_REQUIRE_DOCKER=1` where `strict`.
pub fn chromium_or_skip(test: &str, strict: bool) -> Option<(PathBuf, PathBuf)> {
    match find_chromium() {
        Ok(found) => Some(found),
        Err(what) => {
            assert!(
                std::env::var("ODAC_ALLOW_SKIP").as_deref() == Ok("1")
                    && !(strict && std::env::var("ODAC_REQUIRE_DOCKER").as_deref() == Ok("1")),
                "{test} cannot run: {what} (apt-get install chromium chromium-driver; or set \
                 ODAC_ALLOW_SKIP=1 to skip it)"
            );
            println!("skip: {test}: {what} (ODAC_ALLOW_SKIP=1)");
            None
        }
    }
}

/// Paths of the browser and its driver, or why they are missing.
pub fn find_chromium() -> Result<(PathBuf, PathBuf), String> {
    let browser = find_exe("ODAC_CHROMIUM", &["chromium", "chromium-browser"])
        .ok_or("chromium not found (apt-get install chromium, or set ODAC_CHROMIUM)")?;
    let driver = find_exe("ODAC_CHROMEDRIVER", &["chromedriver"]).ok_or(
        "chromedriver not found (apt-get install chromium-driver, or set ODAC_CHROMEDRIVER)",
    )?;
    Ok((browser, driver))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running `chromedriver` and one browser session on it.
pub struct Driver {
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Driver {
    /// Starts `chromedriver` and a headless `browser` session.
    pub async fn start(browser: &Path, driver: &Path) -> Driver {
        let port = free_port();
        let mut child = Command::new(driver)
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            // its own group: dropping the driver also ends the browser it started
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", driver.display()));
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(15);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("chromedriver exited at start: {status}");
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("chromedriver did not listen on {addr} within 15 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = tempfile::tempdir().unwrap();
        let caps = json!({
            "browserName": "chrome",
            "acceptInsecureCerts": true,
            "goog:chromeOptions": {
                "binary": browser.display().to_string(),
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    // the simulator's certificate is signed by a test CA: this browser only
                    "--ignore-certificate-errors",
                    "--no-first-run",
                    "--hide-scrollbars",
                    format!("--window-size={},{}", WINDOW.0, WINDOW.1),
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
        });
        // ODAC_CHROME_NETLOG=FILE records the browser's network log (net errors such as
        // ERR_NETWORK_CHANGED, which Chromium raises when Docker adds or removes a veth)
        let mut caps = caps;
        if let Some(path) = std::env::var_os("ODAC_CHROME_NETLOG")
            && let Some(args) = caps["goog:chromeOptions"]["args"].as_array_mut()
        {
            args.push(json!(format!("--log-net-log={}", path.to_string_lossy())));
        }
        let Value::Object(caps) = caps else {
            unreachable!()
        };
        let caps: Capabilities = caps;
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://{addr}"))
            .await;
        let client = match client {
            Ok(c) => c,
            Err(e) => {
                kill_group(&mut child);
                panic!("cannot open a Chromium session through chromedriver: {e}");
            }
        };
        client.set_window_size(WINDOW.0, WINDOW.1).await.unwrap();
        Driver {
            client,
            driver: child,
            _profile: profile,
        }
    }

    /// Opens `url` and waits up to 20 s for a page whose title contains `title`. A navigation
    /// that ends on the browser's own error page (a connection reset while the machine is
    /// loaded) is retried; on timeout a screenshot goes to `failure_png` and the panic names
    /// the URL, title and text the browser last showed.
    pub async fn open(&self, url: &str, title: &str, failure_png: &Path) {
        let deadline = Instant::now() + Duration::from_secs(40);
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            if let Err(e) = self.client.goto(url).await {
                println!("navigation {attempts} to {url} failed: {e}");
            }
            let settle = Instant::now() + Duration::from_secs(3);
            loop {
                let (shown, href, text) = self.shown().await;
                if shown.contains(title) {
                    if self.loaded(Duration::from_secs(10)).await {
                        if attempts > 1 {
                            println!("{url} opened on navigation {attempts}");
                        }
                        return;
                    }
                    // the page came but its scripts never showed the fleet (a script or a
                    // request lost on this loaded machine): say what it shows, and again
                    let state = self.page_state().await;
                    println!("navigation {attempts} to {url}: not loaded after 10 s: {state}");
                    if Instant::now() > deadline {
                        self.screenshot(failure_png).await;
                        panic!(
                            "{url} never finished loading ({attempts} navigations): {state} \
                             (screenshot: {})",
                            failure_png.display()
                        );
                    }
                    break;
                }
                let error_page = href.starts_with("chrome-error:");
                if Instant::now() > deadline {
                    self.screenshot(failure_png).await;
                    panic!(
                        "{url} did not show a page titled {title:?} within 40 s \
                         ({attempts} navigations); last: title {shown:?}, location {href:?}, \
                         text {text:?} (screenshot: {})",
                        failure_png.display()
                    );
                }
                if error_page || Instant::now() > settle {
                    println!("navigation {attempts} to {url} showed {href:?} {text:?}; again");
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Whether the page has shown its data within `within`: a page whose body carries
    /// `data-state` (the dashboard: `loading` until its first fetch is rendered) is loaded
    /// when that says `loaded`; any other page as soon as it is shown.
    async fn loaded(&self, within: Duration) -> bool {
        let until = Instant::now() + within;
        loop {
            let v = self
                .client
                .execute(
                    "return document.body ? (document.body.dataset.state || 'loaded') : 'none';",
                    vec![],
                )
                .await;
            if matches!(&v, Ok(Value::String(s)) if s == "loaded") {
                return true;
            }
            if Instant::now() > until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// What a page that did not load shows: its message line, its live pill, whether
    /// `dashboard.js` ran.
    async fn page_state(&self) -> String {
        let v = self
            .client
            .execute(
                "const t = id => { const e = document.getElementById(id); \
                 return e ? e.className + ': ' + e.textContent : 'none'; }; \
                 return 'message ' + t('message') + '; live ' + t('live') + \
                 '; dashboard.js ' + (typeof load);",
                vec![],
            )
            .await;
        match v {
            Ok(Value::String(s)) => s,
            Ok(other) => other.to_string(),
            Err(e) => format!("script failed: {e}"),
        }
    }

    /// The page's title, location and the start of its text.
    async fn shown(&self) -> (String, String, String) {
        let v = self
            .client
            .execute(
                "return [document.title, String(location.href), \
                 (document.body ? document.body.innerText : '').slice(0, 300)];",
                vec![],
            )
            .await;
        match v {
            Ok(Value::Array(a)) => {
                let s = |i: usize| a.get(i).and_then(Value::as_str).unwrap_or("").to_owned();
                (s(0), s(1), s(2))
            }
            Ok(other) => (String::new(), String::new(), other.to_string()),
            Err(e) => (String::new(), String::new(), format!("script failed: {e}")),
        }
    }

    /// Ends the browser session (the drop then stops the driver).
    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }

    /// Runs `script` (a function body; `arguments[0..]` are `args`) and decodes its result.
    pub async fn eval<T: DeserializeOwned>(&self, script: &str, args: Vec<Value>) -> T {
        let v = self
            .client
            .execute(script, args)
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"));
        serde_json::from_value(v.clone())
            .unwrap_or_else(|e| panic!("script result {v} does not decode: {e}"))
    }

    /// Polls `probe` every 100 ms until `ok` holds on its result, for at most `within`. On
    /// timeout, saves a screenshot to `failure_png` and panics with `what` and the last value.
    pub async fn wait_for<T, F, Fut>(
        &self,
        what: &str,
        within: Duration,
        failure_png: &Path,
        mut probe: F,
        ok: impl Fn(&T) -> bool,
    ) -> T
    where
        T: std::fmt::Debug,
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = T>,
    {
        let deadline = Instant::now() + within;
        loop {
            let v = probe().await;
            if ok(&v) {
                return v;
            }
            if Instant::now() > deadline {
                self.screenshot(failure_png).await;
                panic!(
                    "timed out after {within:?} waiting for {what}; last: {v:?} (screenshot: {})",
                    failure_png.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Clicks the element at CSS `selector`, finding it again when the page re-rendered it
    /// between the lookup and the click (stale element), for at most 10 s.
    pub async fn click(&self, selector: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = match self.client.find(Locator::Css(selector)).await {
                Ok(e) => e.click().await,
                Err(e) => Err(e),
            };
            match r {
                Ok(()) => return,
                Err(e) if Instant::now() > deadline => panic!("cannot click {selector}: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// Types `text` (WebDriver keys: `\u{E007}` is Enter) into the element at CSS `selector`.
    pub async fn type_text(&self, selector: &str, text: &str) {
        let e = self
            .client
            .find(Locator::Css(selector))
            .await
            .unwrap_or_else(|e| panic!("no {selector}: {e}"));
        e.send_keys(text)
            .await
            .unwrap_or_else(|e| panic!("cannot type into {selector}: {e}"));
    }

    /// Saves a PNG screenshot of the window to `path`.
    pub async fn screenshot(&self, path: &Path) {
        match self.client.screenshot().await {
            Ok(png) => {
                if let Some(dir) = path.parent() {
                    let _ = std::fs::create_dir_all(dir);
                }
                if let Err(e) = std::fs::write(path, png) {
                    println!("cannot write {}: {e}", path.display());
                }
            }
            Err(e) => println!("cannot take a screenshot: {e}"),
        }
    }
}

fn kill_group(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stderr(Stdio::null())
        .status();
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for Driver {
    fn drop(&mut self) {
        kill_group(&mut self.driver);
    }
}

/// The cargo target directory this test binary runs from (`target/debug/deps/…` → `target`).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors()
        .nth(3)
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf)
}
