//! The `odac` command line client of the control plane's REST API:
//! `odac app create|gpu|update|list|restart|remove|show|logs|exec|shell`, `odac host
//! list|show|enroll-code`, `odac registry` and `odac events`. Exit codes: 0 success,
//! 1 failed request (the API's message in terms of the flags given, or "cannot reach the
//! API"), 2 usage error; `exec` and `shell` exit with the command's own code, or 125 when the
//! session ends without one.

pub mod agent_update;
pub mod args;
pub mod client;
pub mod diagnosis;
pub mod enroll_code;
pub mod events;
pub mod exec;
pub mod exec_conn;
pub mod flags;
pub mod gpu_health;
pub mod gpu_table;
pub mod logs;
pub mod registry;
pub mod shell;
pub mod show;
pub mod table;
pub mod term;
pub mod update;

use std::io::Read;

use clap::Parser;

use serde_json::{Map, Value, json};

pub use self::args::{
    AgentCommand, AppCommand, Cli, Command, Count, CreateArgs, GpuArgs, GpuFlags, HostCommand,
    ListArgs, NameArg, parse_count,
};
use self::client::{Client, ClientError, segment};
use crate::state::views::{AppView, HostView};

fn gpu_json(
    runtime: &str,
    count: Option<Count>,
    optional: bool,
    capabilities: Option<odac_protocol::DriverCapabilities>,
    min_vram_mib: Option<u32>,
) -> Value {
    let mut m = Map::new();
    m.insert("runtime".into(), json!(runtime));
    match count {
        Some(Count::N(n)) => {
            m.insert("count".into(), json!(n));
        }
        Some(Count::All) => {
            m.insert("count".into(), json!("all"));
        }
        None => {}
    }
    if optional {
        m.insert("optional".into(), json!(true));
    }
    if let Some(set) = capabilities {
        m.insert("capabilities".into(), json!(set.names()));
    }
    if let Some(mib) = min_vram_mib {
        m.insert("min_vram_mib".into(), json!(mib));
    }
    Value::Object(m)
}

impl GpuFlags {
    /// The GPU request these flags make (`auto` without a vendor flag: the control plane
    /// detects the vendor, or with --optional the agent does at every start).
    pub fn request(&self) -> Value {
        gpu_json(
            self.runtime(),
            self.count,
            self.optional,
            self.driver_capabilities(),
            self.min_vram_mib,
        )
    }
}

impl CreateArgs {
    /// The `POST /api/apps` body built from the flags (not for `-f`).
    pub fn body(&self) -> Value {
        let mut m = Map::new();
        if let Some(n) = &self.name {
            m.insert("name".into(), json!(n));
        }
        if let Some(i) = &self.image {
            m.insert("image".into(), json!(i));
        }
        if let Some(a) = &self.app {
            m.insert("type".into(), json!("app"));
            m.insert("app".into(), json!(a));
        }
        if let Some(u) = &self.url {
            let mut src = Map::new();
            src.insert("url".into(), json!(u));
            if let Some(b) = &self.branch {
                src.insert("branch".into(), json!(b));
            }
            m.insert("source".into(), Value::Object(src));
        }
        if let Some(h) = &self.host {
            m.insert("host".into(), json!(h));
        }
        if self.gpu.any() {
            m.insert("gpu".into(), self.gpu.request());
        }
        Value::Object(m)
    }
}

impl GpuArgs {
    /// The `PUT /api/apps/{name}/gpu` body.
    pub fn body(&self) -> Value {
        if self.off {
            return Value::Bool(false);
        }
        self.gpu.request()
    }
}

/// Reads the JSON app spec of `odac app create -f FILE` (`-` = standard input); `host`
/// (from --host) is added unless the spec names one.
pub fn read_payload(file: &str, host: Option<&str>) -> Result<Value, ClientError> {
    let (what, text) = if file == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| ClientError::new(format!("cannot read the app spec from stdin: {e}")))?;
        ("stdin".to_owned(), s)
    } else {
        let s = std::fs::read_to_string(file)
            .map_err(|e| ClientError::new(format!("cannot read the app spec {file}: {e}")))?;
        (file.to_owned(), s)
    };
    let mut v: Value = serde_json::from_str(&text)
        .map_err(|e| ClientError::new(format!("{what}: not valid JSON: {e}")))?;
    let Value::Object(m) = &mut v else {
        return Err(ClientError::new(format!(
            "{what}: expected a JSON object (an app spec such as {{\"name\":\"my-app\",\"image\":\"nginx\"}})"
        )));
    };
    if let Some(h) = host
        && !m.contains_key("host")
    {
        m.insert("host".into(), json!(h));
    }
    Ok(v)
}

fn print_json(v: &Value) {
    let text = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
    println!("{}", term::json_safe(&text));
}

fn app_path(name: &str) -> String {
    format!("/api/apps/{}", segment(name))
}

fn unexpected(e: serde_json::Error) -> ClientError {
    ClientError::new(format!("unexpected answer: {e}"))
}

fn host_of(v: &AppView) -> &str {
    if v.hostname.is_empty() {
        &v.host
    } else {
        &v.hostname
    }
}

/// `odac app create`: from flags (refusals in terms of the flags) or from `-f` (refusals in
/// terms of the spec's own fields).
fn create(client: &Client, args: &CreateArgs) -> Result<(), ClientError> {
    let (body, from_flags) = match &args.file {
        Some(file) => (read_payload(file, args.host.as_deref())?, false),
        None => (args.body(), true),
    };
    let answer = client
        .post("/api/apps", &body)
        .map_err(|e| if from_flags { flags::in_flags(e) } else { e })?;
    let v: AppView = serde_json::from_value(answer).map_err(unexpected)?;
    term::println(&format!(
        "created app {} on {} ({})",
        v.name,
        host_of(&v),
        v.state
    ));
    let sent_auto = body
        .get("gpu")
        .and_then(|g| serde_json::from_value::<odac_protocol::GpuRequest>(g.clone()).ok())
        .is_some_and(|g| crate::gpu_auto::needs_detection(&g));
    if sent_auto && let Some(g) = &v.requested {
        term::println(&format!(
            "gpu request {} (vendor detected on {})",
            table::request(Some(g)),
            host_of(&v)
        ));
    }
    Ok(())
}

/// `odac app gpu`.
fn gpu(client: &Client, args: &GpuArgs) -> Result<(), ClientError> {
    let v = client
        .put(&format!("{}/gpu", app_path(&args.name)), &args.body())
        .map_err(flags::in_flags)?;
    let app: AppView =
        serde_json::from_value(v.get("app").cloned().unwrap_or_default()).map_err(unexpected)?;
    let detected: Option<crate::placement::Detection> = v
        .get("detected")
        .and_then(|d| serde_json::from_value(d.clone()).ok());
    let how = detected
        .as_ref()
        .map(|d| format!(" (vendor detected on {})", d.host))
        .unwrap_or_default();
    term::println(&format!(
        "app {}: gpu request {}{how}",
        app.name,
        table::request(app.requested.as_ref())
    ));
    if let Some(d) = &detected
        && let Some(reason) = d.unusable
    {
        term::println(&format!(
            "note: the {} GPUs of {} cannot be used now ({reason}: {}); the app will report \
             it, `odac host list` shows the host's reasons",
            d.vendor,
            d.host,
            reason.explanation()
        ));
    }
    if v.get("restart_required_to_apply") == Some(&Value::Bool(true)) {
        term::println(&format!(
            "restart required to apply: odac app restart {}",
            app.name
        ));
    }
    Ok(())
}

fn execute(cli: &Cli) -> Result<(), ClientError> {
    let client = Client::new(&cli.api, cli.ca_file.as_deref(), cli.token.clone())?;
    dispatch(cli, &client).map_err(|e| with_known_names(&client, e))
}

/// An unknown app or host, with the names the control plane knows: a typo is one look away.
fn with_known_names(client: &Client, e: ClientError) -> ClientError {
    let (path, what) = if e.message.starts_with("unknown app ") {
        ("/api/apps", "apps")
    } else if e.message.starts_with("unknown host ") {
        ("/api/hosts", "hosts")
    } else {
        return e;
    };
    let listed = client.get(path).ok();
    let names: Vec<String> = listed
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| match what {
            "apps" => v["name"].as_str().map(str::to_owned),
            _ => v["id"].as_str().map(|id| match v["hostname"].as_str() {
                Some(h) if !h.is_empty() && h != id => format!("{h} ({id})"),
                _ => id.to_owned(),
            }),
        })
        .collect();
    let known = match (listed.is_some(), names.is_empty()) {
        (false, _) => return e,
        (true, true) => format!("no {what} known yet"),
        (true, false) => format!("known {what}: {}", names.join(", ")),
    };
    ClientError {
        message: format!("{}; {known}", e.message),
        ..e
    }
}

fn dispatch(cli: &Cli, client: &Client) -> Result<(), ClientError> {
    match &cli.command {
        Command::App(AppCommand::Create(args)) => create(client, args)?,
        Command::App(AppCommand::Gpu(args)) => gpu(client, args)?,
        Command::App(AppCommand::Update(args)) => update::update(client, args)?,
        Command::App(AppCommand::List(args)) => {
            let v = client.get("/api/apps")?;
            if args.json {
                print_json(&v);
            } else {
                let apps: Vec<AppView> = serde_json::from_value(v).map_err(unexpected)?;
                term::print(&table::apps(&apps));
            }
        }
        Command::App(AppCommand::Restart(a)) => {
            let v: AppView = serde_json::from_value(
                client.post(&format!("{}/restart", app_path(&a.name)), &json!({}))?,
            )
            .map_err(unexpected)?;
            term::println(&format!(
                "restart requested for app {} (restart token {})",
                v.name,
                v.restart_token.unwrap_or_default()
            ));
        }
        Command::App(AppCommand::Remove(a)) => {
            client.delete(&app_path(&a.name))?;
            term::println(&format!("removed app {}", a.name));
        }
        Command::App(AppCommand::Show(a)) => {
            let v: AppView =
                serde_json::from_value(client.get(&app_path(&a.name))?).map_err(unexpected)?;
            term::print(&show::show(&v));
        }
        Command::App(AppCommand::Exec(_) | AppCommand::Shell(_)) => {
            return Err(ClientError::new("exec sessions are run by cli::run"));
        }
        Command::App(AppCommand::Logs(a)) => {
            logs::logs(client, a, &mut std::io::stdout(), &mut std::io::stderr())?;
        }
        Command::Registry(command) => registry::run(client, command)?,
        Command::Agent(AgentCommand::Update(args)) => agent_update::run(client, args)?,
        Command::Events(args) => events::events(client, args)?,
        Command::Host(HostCommand::List(args)) => {
            let v = client.get("/api/hosts")?;
            if args.json {
                print_json(&v);
            } else {
                let hosts: Vec<HostView> = serde_json::from_value(v).map_err(unexpected)?;
                term::print(&table::hosts(&hosts));
            }
        }
        Command::Host(HostCommand::Show(args)) => gpu_table::show(client, args)?,
        Command::Host(HostCommand::EnrollCode(args)) => {
            enroll_code::run(client, cli.ca_file.as_deref(), args)?;
        }
    }
    Ok(())
}

/// Usage rules clap cannot express alongside the argument groups.
fn check_usage(cli: &Cli) -> Result<(), String> {
    if let Command::App(AppCommand::Create(a)) = &cli.command
        && a.branch.is_some()
        && a.url.is_none()
    {
        return Err("--branch needs -u/--url".to_owned());
    }
    Ok(())
}

/// Runs the CLI on `args` (including the program name); returns the exit code.
pub fn run<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    if let Err(msg) = check_usage(&cli) {
        let mut cmd = <Cli as clap::CommandFactory>::command();
        let _ = cmd
            .error(clap::error::ErrorKind::ArgumentConflict, msg)
            .print();
        return 2;
    }
    let target = exec_conn::Target {
        api: &cli.api,
        ca_file: cli.ca_file.as_deref(),
        token: cli.token.as_deref(),
    };
    let session = match &cli.command {
        Command::App(AppCommand::Exec(a)) => Some(exec::exec(target, a)),
        Command::App(AppCommand::Shell(a)) => Some(shell::shell(target, a)),
        _ => None,
    };
    if let Some(result) = session {
        return result.unwrap_or_else(|e| {
            eprintln!("error: {}", term::visible(&e.to_string()));
            1
        });
    }
    match execute(&cli) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {}", term::visible(&e.to_string()));
            1
        }
    }
}
