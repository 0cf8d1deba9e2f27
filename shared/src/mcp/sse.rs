//! Server-sent events as the WHATWG HTML standard frames them: an optional
//! byte order mark, lines ended by CRLF, LF or CR, `field: value`, an
//! event dispatched at a blank line when it has data. Only `event`,
//! `data`, `id` and `retry` matter to a handshake.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Event {
    /// The `event` field; `message` when none (or an empty one) was given.
    pub name: String,
    /// The `data` lines, joined by LF.
    pub data: String,
}

/// Reads events from bytes as they arrive.
#[derive(Debug, Default)]
pub struct Reader {
    pending: Vec<u8>,
    name: Option<String>,
    data: Option<String>,
    /// A CR ended the last line: an LF right after it ends nothing.
    after_cr: bool,
    /// Bytes seen, to drop a byte order mark at the start.
    seen: usize,
    last_id: Option<String>,
    retry_ms: Option<u64>,
}

impl Reader {
    /// Feeds `bytes`, returning the events they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Event> {
        let mut events = Vec::new();
        for &byte in bytes {
            self.seen += 1;
            if std::mem::take(&mut self.after_cr) && byte == b'\n' {
                continue;
            }
            match byte {
                b'\r' | b'\n' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.pending);
                    let line = match line.strip_prefix("\u{feff}".as_bytes()) {
                        Some(rest) if self.seen == line.len() + 1 => rest,
                        _ => &line,
                    };
                    if let Some(event) = self.line(line) {
                        events.push(event);
                    }
                }
                _ => self.pending.push(byte),
            }
        }
        events
    }

    /// The last event id the stream set (`id`), to resume after.
    pub fn last_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// How long the server asked a client to wait before it reconnects.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
    }

    fn line(&mut self, line: &[u8]) -> Option<Event> {
        if line.is_empty() {
            let data = self.data.take();
            let name = self.name.take();
            return data.filter(|data| !data.is_empty()).map(|data| Event {
                name: name
                    .filter(|name| !name.is_empty())
                    .unwrap_or_else(|| "message".into()),
                data,
            });
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => self.name = Some(value.to_string()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            "id" if !value.contains('\0') => self.last_id = Some(value.to_string()),
            "retry" => {
                if let Ok(ms) = value.parse() {
                    self.retry_ms = Some(ms);
                }
            }
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_anywhere_and_any_line_end() {
        let stream = "\u{feff}: comment\r\nevent: endpoint\r\ndata: /message?s=1\r\n\r\nid: 7\ndata:\n\nevent:\ndata: {\"a\":\ndata: 1}\n\nid: 3\rretry: 500\rdata:x\r\r"
            .as_bytes();
        for cut in 0..stream.len() {
            let mut reader = Reader::default();
            let mut events = reader.feed(&stream[..cut]);
            events.extend(reader.feed(&stream[cut..]));
            assert_eq!(
                events,
                [
                    Event {
                        name: "endpoint".into(),
                        data: "/message?s=1".into()
                    },
                    // The priming event (id 7, no data) is not dispatched.
                    Event {
                        name: "message".into(),
                        data: "{\"a\":\n1}".into()
                    },
                    Event {
                        name: "message".into(),
                        data: "x".into()
                    },
                ],
                "cut at {cut}"
            );
            assert_eq!(reader.last_id(), Some("3"));
            assert_eq!(reader.retry_ms(), Some(500));
        }
    }
}
