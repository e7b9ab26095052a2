//! The header of a step's rank directory: the top-level fields of its dump.json (task, level,
//! dump_data_dir). The recorder fills it from the configuration when a step opens, the writer
//! writes it at the top of dump.json, and the journal names it with each directory so that
//! `msprobe recover` can write it again.

/// The top-level fields of a dump.json.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    pub task: String,
    pub level: String,
    pub dump_data_dir: Option<String>,
}

impl Default for Header {
    /// The header of a directory nobody opened with one (a record for a step the writer was not
    /// told about), and the fallback for each field a journal's header lacks: the configuration's
    /// defaults, task `statistics` at level `L1`, without tensor files.
    fn default() -> Header {
        Header { task: "statistics".into(), level: "L1".into(), dump_data_dir: None }
    }
}
