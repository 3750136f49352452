//! `capfleet serve`: the headless server (`capfleet-server`), and `capfleet serve token
//! add`, which prints a new token's secret.

use std::process::ExitCode;

use capfleet_app::launch::EXIT_INVALID;
use capfleet_app::style::{ColorChoice, Style};
pub(crate) use capfleet_server::ServeArgs;
use capfleet_server::{ServeCommand, TokenCommand};

pub(crate) fn run(args: ServeArgs, color: ColorChoice) -> ExitCode {
    let Some(ServeCommand::Token(TokenCommand::Add {
        name,
        role,
        token_file,
    })) = &args.command
    else {
        return capfleet_server::run(args, color);
    };
    match capfleet_server::add_token(token_file, name, *role) {
        Ok(secret) => {
            eprintln!(
                "capfleet: token `{name}` ({}) added to {}; its secret, shown this once:",
                role.as_str(),
                token_file.display()
            );
            println!("{secret}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{} {e}", Style::for_stderr(color).err("error:"));
            ExitCode::from(EXIT_INVALID)
        }
    }
}
