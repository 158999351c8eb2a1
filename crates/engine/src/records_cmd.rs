//! `archlab-engine records export`: turn a raw records file written by `load --records` into
//! JMeter's JTL CSV. Argument parsing only; the format and the mapping of fields live in
//! `archlab_load::records` (`export_jtl`). Parquet is not written here: the Python side
//! reads the fixed-size records directly (numpy) and writes Parquet with pyarrow.

use crate::CliError;
use archlab_load::{export_jtl, RecordReader};
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum RecordsCommand {
    /// Convert a records file to another format.
    Export(ExportArgs),
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// Records file written by `archlab-engine load --records FILE`.
    input: PathBuf,
    /// Write JMeter's JTL CSV (default columns, JMeter's order) to this file ("-" for stdout).
    #[arg(long)]
    jtl: PathBuf,
}

pub fn run(cmd: RecordsCommand) -> Result<(), CliError> {
    let RecordsCommand::Export(a) = cmd;
    let reader = RecordReader::open(&a.input)
        .map_err(|e| CliError::runtime(format!("cannot read records file {}: {e}", a.input.display())))?;
    let failed = |e: std::io::Error| CliError::runtime(format!("cannot export to {}: {e}", a.jtl.display()));
    let rows = if a.jtl.as_os_str() == "-" {
        export_jtl(reader, std::io::stdout().lock()).map_err(failed)?
    } else {
        let out = std::fs::File::create(&a.jtl).map_err(failed)?;
        export_jtl(reader, out).map_err(failed)?
    };
    eprintln!("records: {rows} rows written to {}", a.jtl.display());
    Ok(())
}
