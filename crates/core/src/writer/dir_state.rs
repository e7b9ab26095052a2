//! What one rank directory's JSON files hold: each record formatted once, into exactly the text
//! it has inside dump.json (the same text goes to the journal), plus the stack.json and
//! construct.json values, and the whole text of each file made from them.

use super::json_files::{write_map, JsonFile};
use crate::fsutil;
use crate::header::Header;
use crate::json::{self, Json};
use indexmap::IndexMap;
use std::path::Path;

/// The state of one rank directory: each record's final text (as it appears inside dump.json)
/// in completion order, plus stack.json and construct.json values.
#[derive(Default)]
pub struct DirState {
    pub header: Option<Header>,
    /// Changed since the JSON files were last written.
    pub dirty: bool,
    pub records: IndexMap<String, String>,
    pub stack: IndexMap<String, String>,
    pub construct: IndexMap<String, String>,
    /// Per JSON file ([`JsonFile::index`]): an entry already in the map got a new value since
    /// the last write, so the file is rewritten whole instead of extended.
    pub(super) replaced: [bool; 3],
}

/// Depth of a record body inside dump.json (`{"data": {"name": body}}`).
pub const RECORD_DEPTH: usize = 2;
/// The formatted body of a record every section of which data_mode dropped.
const EMPTY_RECORD: &str = "{}";

pub fn pretty(v: &Json, depth: usize) -> String {
    let mut s = String::with_capacity(4096);
    v.write_pretty_at(&mut s, depth);
    s
}

/// A stack.json value (depth 1): the text `pretty` gives the list of frames, written without
/// building it (capturing threads format each record's stack).
pub fn stack_text(frames: &[String]) -> String {
    if frames.is_empty() {
        return "[]".into();
    }
    let mut s = String::with_capacity(frames.iter().map(|f| f.len() + 8).sum::<usize>() + 4);
    s.push('[');
    for (i, f) in frames.iter().enumerate() {
        s.push_str(if i == 0 { "\n  " } else { ",\n  " });
        json::write_string(&mut s, f);
    }
    s.push_str("\n ]");
    s
}

/// A construct.json value.
pub fn parent_text(p: &Option<String>) -> String {
    p.clone().map(Json::str).unwrap_or(Json::Null).to_compact()
}

impl DirState {
    /// Adds a record's formatted body; a second record with the same name merges into the first
    /// key by key (msprobe does this for ops whose inputs and outputs are collected at different
    /// times).
    pub fn add_text(&mut self, name: &str, text: String) {
        self.dirty = true;
        if text == EMPTY_RECORD {
            // Every section dropped by data_mode: msprobe 1.1.1 writes no dump.json entry (its
            // `handle_data` skips empty data) but keeps the record's stack.json and construct.json
            // entries, which `add` sets beside this.
            return;
        }
        let merged = match self.records.get(name) {
            Some(old) => match (json::parse(old), json::parse(&text)) {
                (Ok(Json::Object(mut old)), Ok(Json::Object(new))) => {
                    for (k, v) in new {
                        match old.iter_mut().find(|(ok, _)| *ok == k) {
                            Some(slot) => slot.1 = v,
                            None => old.push((k, v)),
                        }
                    }
                    pretty(&Json::Object(old), RECORD_DEPTH)
                }
                _ => text,
            },
            None => text,
        };
        if self.records.insert(name.to_string(), merged).is_some() {
            self.replaced[JsonFile::Dump.index()] = true;
        }
    }

    /// Sets a stack.json value.
    pub fn set_stack(&mut self, name: String, text: String) {
        self.set(JsonFile::Stack, name, text);
    }

    /// Sets a construct.json value (a module's parent is set when it starts and again with its
    /// record: the same value is no change).
    pub fn set_construct(&mut self, name: String, text: String) {
        self.set(JsonFile::Construct, name, text);
    }

    fn set(&mut self, file: JsonFile, name: String, text: String) {
        let map = if file == JsonFile::Stack { &mut self.stack } else { &mut self.construct };
        match map.get(&name) {
            Some(old) if *old == text => return,
            Some(_) => self.replaced[file.index()] = true,
            None => {}
        }
        map.insert(name, text);
        self.dirty = true;
    }

    /// Adds a record body.
    pub fn add(&mut self, name: &str, body: &Json, stack: Option<&[String]>, parent: Option<&Option<String>>) {
        self.add_text(name, pretty(body, RECORD_DEPTH));
        if let Some(frames) = stack {
            self.set_stack(name.to_string(), stack_text(frames));
        }
        if let Some(p) = parent {
            self.set_construct(name.to_string(), parent_text(p));
        }
    }

    /// The map a JSON file holds.
    pub(super) fn map(&self, file: JsonFile) -> &IndexMap<String, String> {
        match file {
            JsonFile::Dump => &self.records,
            JsonFile::Stack => &self.stack,
            JsonFile::Construct => &self.construct,
        }
    }

    /// What comes before the map in a JSON file: dump.json's header fields.
    fn head(&self, file: JsonFile) -> String {
        if file != JsonFile::Dump {
            return String::new();
        }
        let h = self.header.clone().unwrap_or_default();
        let mut out = String::with_capacity(128);
        out.push_str("{\n");
        out.push_str(&format!(" \"task\": {},\n", Json::str(h.task).to_compact()));
        out.push_str(&format!(" \"level\": {},\n", Json::str(h.level).to_compact()));
        out.push_str(&format!(
            " \"dump_data_dir\": {},\n",
            h.dump_data_dir.map(Json::str).unwrap_or(Json::Null).to_compact()
        ));
        out.push_str(" \"data\": ");
        out
    }

    /// The whole text of a JSON file.
    pub(super) fn text(&self, file: JsonFile) -> String {
        let map = self.map(file);
        let head = self.head(file);
        let size: usize = map.iter().map(|(k, v)| k.len() + v.len() + 8).sum();
        let mut out = String::with_capacity(head.len() + size + 16);
        out.push_str(&head);
        write_map(&mut out, map, file.depth());
        out.push_str(file.tail());
        out
    }

    /// The texts of dump.json, stack.json and construct.json, in [`JsonFile::ALL`] order.
    pub fn texts(&self) -> [String; 3] {
        JsonFile::ALL.map(|f| self.text(f))
    }

    /// Writes dump.json, stack.json and construct.json into `dir`, each through a temporary and
    /// a rename (recovery, and directories whose files could not be kept open).
    pub fn write_files(&self, dir: &Path) -> std::io::Result<()> {
        for (file, text) in JsonFile::ALL.into_iter().zip(self.texts()) {
            fsutil::replace_file(&dir.join(file.name()), text.as_bytes())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_text_is_the_pretty_list() {
        for frames in
            [vec![], vec!["a".to_string()], vec!["File \"x.py\", line 1, in f, \n f()\t\u{e9}".into(), "b".into()]]
        {
            let want = pretty(&Json::Array(frames.iter().map(|f| Json::str(f.clone())).collect()), 1);
            assert_eq!(stack_text(&frames), want);
        }
    }

    /// A record data_mode emptied has no dump.json entry, but its stack.json and construct.json
    /// entries, as msprobe 1.1.1's (`DataCollector.forward_data_collect` writes the stack before
    /// `handle_data` skips the empty data).
    #[test]
    fn an_emptied_record_keeps_its_stack_and_parent_only() {
        let mut s = DirState::default();
        let frames = ["File a.py, line 1, in f, \n f()".to_string()];
        s.add("Functional.linear.0.forward", &Json::Object(vec![]), Some(&frames), Some(&Some("M".into())));
        assert_eq!(pretty(&Json::Object(vec![]), RECORD_DEPTH), EMPTY_RECORD);
        assert!(s.records.is_empty());
        assert_eq!(s.stack.keys().collect::<Vec<_>>(), ["Functional.linear.0.forward"]);
        assert_eq!(s.construct.keys().collect::<Vec<_>>(), ["Functional.linear.0.forward"]);
        // a later record of the same name with data is written whole
        s.add_text("Functional.linear.0.forward", pretty(&json::parse(r#"{"output": [1]}"#).unwrap(), RECORD_DEPTH));
        assert_eq!(s.records.len(), 1);
    }

    #[test]
    fn merge_same_name_key_by_key() {
        let mut s = DirState::default();
        s.add("Distributed.all_reduce.0.forward", &json::parse(r#"{"input_args": [1]}"#).unwrap(), None, None);
        s.add("Distributed.all_reduce.0.forward", &json::parse(r#"{"output": [2]}"#).unwrap(), None, None);
        assert_eq!(s.records.len(), 1);
        assert_eq!(json::parse(&s.records[0]).unwrap(), json::parse(r#"{"input_args": [1], "output": [2]}"#).unwrap());
    }
}
