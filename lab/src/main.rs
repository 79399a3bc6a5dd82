use std::process::ExitCode;

fn main() -> ExitCode {
    cpmlab::cli::main()
}
