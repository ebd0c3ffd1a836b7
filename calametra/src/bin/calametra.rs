//! The `calametra` command-line tool; see `calametra --help`.

fn main() -> std::process::ExitCode {
    calametra::cli::main()
}
