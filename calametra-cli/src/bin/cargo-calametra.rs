//! `cargo calametra ...`: the `calametra` tool as a cargo subcommand, in the manner of
//! `cargo nextest` or `cargo insta`. Cargo runs `cargo-calametra calametra ARGS..`; this
//! program runs the `calametra` installed beside it (`cargo install calametra-cli` installs
//! both) with `ARGS..`, and exits as it does. Nothing else lives here.

use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    // Run by cargo, the first argument is the subcommand's name; run by hand, it is not.
    if args.first().is_some_and(|a| a == "calametra") {
        args.remove(0);
    }
    let name = format!("calametra{}", std::env::consts::EXE_SUFFIX);
    let tool = std::env::current_exe()
        .ok()
        .and_then(|me| me.parent().map(|d| d.join(&name)))
        .filter(|p| p.is_file());
    let Some(tool) = tool else {
        eprintln!(
            "cargo-calametra: no `{name}` beside this program; install both with `cargo install calametra-cli`"
        );
        return ExitCode::from(2);
    };
    let mut c = Command::new(&tool);
    c.args(&args);
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let e = c.exec();
        eprintln!("cargo-calametra: cannot run {}: {e}", tool.display());
        ExitCode::from(2)
    }
    #[cfg(not(unix))]
    match c.status() {
        Ok(s) => ExitCode::from(u8::try_from(s.code().unwrap_or(1)).unwrap_or(1)),
        Err(e) => {
            eprintln!("cargo-calametra: cannot run {}: {e}", tool.display());
            ExitCode::from(2)
        }
    }
}
