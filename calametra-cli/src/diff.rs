//! `calametra diff`: where two traces part ways, field by field.

use crate::output::{clean, usage, CliError};
use clap::Args;
use std::path::PathBuf;

/// The arguments of `calametra diff`.
#[derive(Args, Debug)]
pub(crate) struct DiffArgs {
    /// The first trace.
    a: PathBuf,
    /// The second trace.
    b: PathBuf,
    /// Deterministic records of context shown before the divergence.
    #[arg(long, value_name = "N", default_value_t = 10)]
    context: usize,
    /// Show the non-deterministic records N deterministic records past the divergence too.
    #[arg(long, value_name = "N", default_value_t = 0)]
    nondeterm_window: usize,
    /// Force the envelope: `calametra` (seq/t_ns/kind/actor) or `tsc` (a hypervisor's exits).
    #[arg(long, value_name = "calametra|tsc")]
    format: Option<String>,
}

/// `calametra diff A B [--context N] [--nondeterm-window N] [--format calametra|tsc]`: the
/// record-by-record, field-by-field comparison of two traces (see
/// [`calametra_core::divergence`]). Exit 0 identical, 1 divergent, 2 unusable input.
pub(crate) fn diff(args: &DiffArgs) -> Result<(), CliError> {
    use calametra_core::divergence::{analyse, read, Envelope, Options};
    let (a, b) = (&args.a, &args.b);
    let opts = Options {
        context: args.context,
        nondeterm_window: args.nondeterm_window,
    };
    let format = match &args.format {
        Some(f) => Some(Envelope::parse(f).map_err(|e| usage(&e))?),
        None => None,
    };
    let unusable = |e: calametra_core::trace::TraceFileError| CliError(e.to_string(), 2);
    let ta = read(a, format).map_err(unusable)?;
    let tb = read(b, format).map_err(unusable)?;
    if ta.envelope != tb.envelope {
        return Err(CliError(
            format!(
                "{} is a {} trace and {} a {} trace: there is nothing to compare (force one envelope with --format calametra|tsc)",
                a.display(),
                ta.envelope.name(),
                b.display(),
                tb.envelope.name()
            ),
            2,
        ));
    }
    let an = analyse(&ta, &tb, opts);
    print!("{}", clean(&an.render()));
    if an.identical() {
        Ok(())
    } else {
        Err(CliError("the traces diverge".into(), 1))
    }
}
