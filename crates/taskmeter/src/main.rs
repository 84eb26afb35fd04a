fn main() -> std::process::ExitCode {
    taskmeter::cli::main()
}
