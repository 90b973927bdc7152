//! A command run to completion with its output captured and, optionally, bytes fed to its
//! stdin: the one way the harness runs a short command it talks to (`htpasswd`, `odac`,
//! `docker import`), with every failure naming the command.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use crate::error::{Error, Result};

/// Runs `cmd` (named `what` in errors) to completion, `stdin` written to it (else its stdin is
/// empty), stdout and stderr captured. The exit status is the caller's to judge.
pub fn output_with_stdin(cmd: &mut Command, what: &str, stdin: Option<&[u8]>) -> Result<Output> {
    let mut child = cmd
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::command(what, e.to_string()))?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(bytes)
            .map_err(|e| Error::command(what, format!("cannot write stdin: {e}")))?;
    }
    child
        .wait_with_output()
        .map_err(|e| Error::command(what, e.to_string()))
}
