//! `artq serve --config FILE.toml`: every serve option as a key of a flat
//! TOML table, named as its flag without the dashes (`listen`, `root`,
//! `cache-size` or `cache_size`, `no-ecn`, `0rtt`, `upstream`, ...).
//!
//! There is one definition of the options, the flags': the file is turned
//! into the flags it stands for and inserted after `serve`, before clap
//! parses the command line, so a key is checked, defaulted and documented
//! exactly as its flag is (`artq serve --help`). A flag given on the
//! command line wins over its key (the key is left out, values of a
//! repeatable flag included).
//!
//! Values: a string or a number is the flag's value; `true` gives a switch
//! (`no-ecn = true`), `false` leaves it off; an array repeats the flag once
//! per element (`upstream = ["/a=http://127.0.0.1:8080", ...]`).

use std::ffi::OsString;
use std::path::Path;

use anyhow::{bail, Context, Result};

/// Largest configuration file read.
const MAX_CONFIG: u64 = 1 << 20;

/// `args` (the whole command line, program name first) with the keys of
/// the `--config` file of the `serve` subcommand `serve` spelled out as
/// flags; unchanged when there is no `serve --config`.
pub fn expand(args: Vec<OsString>, serve: &clap::Command) -> Result<Vec<OsString>> {
    let Some(at) = args.iter().position(|a| a == "serve") else {
        return Ok(args);
    };
    let mut path = None;
    let mut i = at + 1;
    while i < args.len() {
        let a = args[i].to_string_lossy();
        if a == "--config" {
            path = Some(args.get(i + 1).context("--config needs a file")?.clone());
            i += 1;
        } else if let Some(v) = a.strip_prefix("--config=") {
            path = Some(OsString::from(v));
        }
        i += 1;
    }
    let Some(path) = path else {
        return Ok(args);
    };
    let given: Vec<String> = args[at + 1..]
        .iter()
        .filter_map(|a| a.to_str())
        .filter_map(|a| a.strip_prefix("--"))
        .map(|a| a.split('=').next().unwrap_or(a).to_string())
        .collect();
    let flags = flags_of(Path::new(&path), serve, &given)?;
    let mut out = args[..=at].to_vec();
    out.extend(flags);
    out.extend_from_slice(&args[at + 1..]);
    Ok(out)
}

/// The flags the file at `path` stands for, less those in `given`.
fn flags_of(path: &Path, serve: &clap::Command, given: &[String]) -> Result<Vec<OsString>> {
    let shown = path.display();
    let meta = std::fs::metadata(path).with_context(|| format!("cannot read --config {shown}"))?;
    if meta.len() > MAX_CONFIG {
        bail!("--config {shown}: larger than {MAX_CONFIG} bytes");
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read --config {shown}"))?;
    let table: toml::Table = text
        .parse()
        .with_context(|| format!("--config {shown} is not valid TOML"))?;
    let mut flags = Vec::new();
    for (key, value) in &table {
        let long = key.replace('_', "-");
        if long == "config" {
            bail!("--config {shown}: a configuration file cannot name another (key `{key}`)");
        }
        let Some(arg) = serve
            .get_arguments()
            .find(|a| a.get_long() == Some(long.as_str()))
        else {
            let mut known: Vec<&str> = serve
                .get_arguments()
                .filter_map(|a| a.get_long())
                .filter(|l| !matches!(*l, "config" | "help"))
                .collect();
            known.sort_unstable();
            bail!(
                "--config {shown}: unknown key `{key}` (the keys are artq serve's flags: {})",
                known.join(", ")
            );
        };
        if given.contains(&long) {
            continue;
        }
        let switch = !arg.get_action().takes_values();
        let values: Vec<&toml::Value> = match value {
            toml::Value::Array(items) => items.iter().collect(),
            v => vec![v],
        };
        for v in values {
            let flag = OsString::from(format!("--{long}"));
            match v {
                toml::Value::Boolean(on) if switch => {
                    if *on {
                        flags.push(flag);
                    }
                }
                _ if switch => {
                    bail!("--config {shown}: `{key}` is a switch: give true or false")
                }
                toml::Value::String(s) => {
                    flags.push(flag);
                    flags.push(OsString::from(s));
                }
                toml::Value::Integer(n) => {
                    flags.push(flag);
                    flags.push(OsString::from(n.to_string()));
                }
                toml::Value::Float(x) => {
                    flags.push(flag);
                    flags.push(OsString::from(x.to_string()));
                }
                toml::Value::Boolean(b) => {
                    flags.push(flag);
                    flags.push(OsString::from(b.to_string()));
                }
                _ => bail!("--config {shown}: `{key}` must be a string, a number or a boolean"),
            }
        }
    }
    Ok(flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command() -> clap::Command {
        clap::Command::new("serve")
            .arg(clap::Arg::new("listen").long("listen").required(true))
            .arg(
                clap::Arg::new("upstream")
                    .long("upstream")
                    .action(clap::ArgAction::Append),
            )
            .arg(
                clap::Arg::new("no_ecn")
                    .long("no-ecn")
                    .action(clap::ArgAction::SetTrue),
            )
            .arg(clap::Arg::new("config").long("config"))
    }

    fn expand_with(file: &str, cli: &[&str]) -> Result<Vec<String>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("serve.toml");
        std::fs::write(&path, file)?;
        let mut args: Vec<OsString> = vec!["artq".into(), "serve".into()];
        args.extend(cli.iter().map(OsString::from));
        args.push("--config".into());
        args.push(path.clone().into());
        let out = expand(args, &command())?;
        Ok(out
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .filter(|a| !a.ends_with("serve.toml"))
            .collect())
    }

    #[test]
    fn keys_become_flags_and_flags_win() {
        let out = expand_with(
            "listen = \"127.0.0.1:1\"\nupstream = [\"http://a:1\", \"/b=http://b:2\"]\nno_ecn = true\n",
            &[],
        )
        .unwrap();
        assert_eq!(
            out,
            [
                "artq",
                "serve",
                "--listen",
                "127.0.0.1:1",
                "--no-ecn",
                "--upstream",
                "http://a:1",
                "--upstream",
                "/b=http://b:2",
                "--config"
            ]
        );
        let out = expand_with("listen = \"127.0.0.1:1\"\n", &["--listen=127.0.0.1:2"]).unwrap();
        assert_eq!(out, ["artq", "serve", "--listen=127.0.0.1:2", "--config"]);
    }

    #[test]
    fn bad_files_are_refused_with_the_key() {
        let e = expand_with("lissten = \"x\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown key `lissten`"), "{e}");
        let e = expand_with("no-ecn = \"yes\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("is a switch"), "{e}");
        let e = expand_with("listen = [\n", &[]).unwrap_err().to_string();
        assert!(e.contains("not valid TOML"), "{e}");
        let e = expand_with("config = \"x\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot name another"), "{e}");
    }
}
