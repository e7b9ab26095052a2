//! The three JSON files of a rank directory and the layout of their text: a map of entries whose
//! values are already formatted, laid out like Python's `json.dump(indent=1)` (after dump.json's
//! header fields, inside its `"data"`), so that a file can be written whole or extended entry by
//! entry with the same bytes.

use crate::json::Json;
use indexmap::IndexMap;

/// A JSON file of a rank directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonFile {
    /// dump.json: the header fields, then the records under `"data"`.
    Dump,
    /// stack.json: each record's stack frames.
    Stack,
    /// construct.json: each module's or record's parent.
    Construct,
}

impl JsonFile {
    /// The files in the order they are written (and indexed).
    pub const ALL: [JsonFile; 3] = [JsonFile::Dump, JsonFile::Stack, JsonFile::Construct];

    pub fn name(self) -> &'static str {
        match self {
            JsonFile::Dump => "dump.json",
            JsonFile::Stack => "stack.json",
            JsonFile::Construct => "construct.json",
        }
    }

    /// Position in [`JsonFile::ALL`], for the per-file arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Depth of the file's map: dump.json's records are one level down, under `"data"`.
    pub fn depth(self) -> usize {
        match self {
            JsonFile::Dump => 1,
            JsonFile::Stack | JsonFile::Construct => 0,
        }
    }

    /// What follows the map in the file: dump.json's closing bracket.
    pub fn tail(self) -> &'static str {
        match self {
            JsonFile::Dump => "\n}",
            JsonFile::Stack | JsonFile::Construct => "",
        }
    }

    /// Bytes after the last of `entries` entries: the map's closing bracket and what follows
    /// the map.
    pub fn closing_len(self, entries: usize) -> u64 {
        (if entries == 0 { 1 } else { self.depth() + 2 }) as u64 + self.tail().len() as u64
    }
}

pub fn write_map(out: &mut String, map: &IndexMap<String, String>, depth: usize) {
    out.push('{');
    write_entries(out, map, 0, depth);
    write_close(out, map.len(), depth);
}

/// The entries of `map` from position `from` on, as [`write_map`] writes them.
pub fn write_entries(out: &mut String, map: &IndexMap<String, String>, from: usize, depth: usize) {
    for (i, (k, v)) in map.iter().enumerate().skip(from) {
        if i > 0 {
            out.push(',');
        }
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', depth + 1));
        out.push_str(&Json::str(k.clone()).to_compact());
        out.push_str(": ");
        out.push_str(v);
    }
}

/// The closing bracket of a map of `entries` entries, as [`write_map`] writes it.
pub fn write_close(out: &mut String, entries: usize, depth: usize) {
    if entries > 0 {
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', depth));
    }
    out.push('}');
}
