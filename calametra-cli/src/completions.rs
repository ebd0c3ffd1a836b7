//! `calametra completions SHELL`: a shell completion script for the tool's command line, which
//! the caller hands in (the root owns the definitions; this file imports nothing from it).

use crate::output::{fail, CliError};

/// Writes the completion script of `cli` (the tool's whole command line) for `shell` to
/// standard output.
pub(crate) fn completions(
    shell: clap_complete::Shell,
    mut cli: clap::Command,
) -> Result<(), CliError> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cli, "calametra", &mut script);
    use std::io::Write;
    match std::io::stdout().write_all(&script) {
        // A reader that stopped early (`| head`) is not an error of ours.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(fail(format!("writing the completion script: {e}")))
        }
        _ => Ok(()),
    }
}
