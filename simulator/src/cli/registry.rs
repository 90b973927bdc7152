//! `odac registry login HOST --username U --password-stdin`, `odac registry list` and
//! `odac registry logout HOST`: the control plane's registry logins (`/api/registries`). The
//! password is read from standard input only (never from the command line, where `ps` and
//! shell history would see it) and never printed.

use std::io::Read;

use serde_json::json;

use super::args::RegistryCommand;
use super::client::{Client, ClientError, segment};
use super::table::render;
use crate::state::registries::RegistryView;

/// Run one `odac registry …` command.
pub fn run(client: &Client, command: &RegistryCommand) -> Result<(), ClientError> {
    match command {
        RegistryCommand::Login(a) => {
            if !a.password_stdin {
                return Err(ClientError::new(
                    "give the password on standard input with --password-stdin",
                ));
            }
            let mut password = String::new();
            std::io::stdin()
                .read_to_string(&mut password)
                .map_err(|e| {
                    ClientError::new(format!("cannot read the password from standard input: {e}"))
                })?;
            let password = password.trim_end_matches(['\n', '\r']);
            let v = client.post(
                "/api/registries",
                &json!({"host": a.host, "username": a.username, "password": password}),
            )?;
            let view: RegistryView = serde_json::from_value(v)
                .map_err(|e| ClientError::new(format!("unexpected answer: {e}")))?;
            match (view.verified, view.note.as_deref()) {
                (true, _) => println!(
                    "logged in to {} as {} (verified with the registry)",
                    view.host, view.username
                ),
                (false, note) => println!(
                    "logged in to {} as {}: stored, not verified (the host's agent will check on its next pull){}",
                    view.host,
                    view.username,
                    note.map(|n| format!(": {}", super::term::visible_cell(n)))
                        .unwrap_or_default()
                ),
            }
        }
        RegistryCommand::List(a) => {
            let v = client.get("/api/registries")?;
            if a.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&v).unwrap_or_else(|_| v.to_string())
                );
            } else {
                let logins: Vec<RegistryView> = serde_json::from_value(v)
                    .map_err(|e| ClientError::new(format!("unexpected answer: {e}")))?;
                let rows: Vec<Vec<String>> = logins
                    .into_iter()
                    .map(|l| {
                        let checked = if l.verified { "yes" } else { "no (stored)" };
                        vec![l.host, l.username, checked.to_owned()]
                    })
                    .collect();
                print!("{}", render(&["REGISTRY", "USERNAME", "VERIFIED"], &rows));
            }
        }
        RegistryCommand::Logout(a) => {
            client.delete(&format!("/api/registries/{}", segment(&a.host)))?;
            println!("logged out of {}", a.host);
        }
    }
    Ok(())
}
