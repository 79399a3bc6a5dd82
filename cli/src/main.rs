use std::process::ExitCode;

fn main() -> ExitCode {
    cpmlab_cli::main()
}
