//! Server-sent events as the WHATWG HTML standard frames them: lines ended
//! by CRLF, LF or CR, `field: value`, an event dispatched at a blank line.
//! Only `event` and `data` matter to a handshake.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Event {
    /// The `event` field; `message` when none was given.
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
}

impl Reader {
    /// Feeds `bytes`, returning the events they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Event> {
        let mut events = Vec::new();
        for &byte in bytes {
            if std::mem::take(&mut self.after_cr) && byte == b'\n' {
                continue;
            }
            match byte {
                b'\r' | b'\n' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.pending);
                    if let Some(event) = self.line(&line) {
                        events.push(event);
                    }
                }
                _ => self.pending.push(byte),
            }
        }
        events
    }

    fn line(&mut self, line: &[u8]) -> Option<Event> {
        if line.is_empty() {
            let data = self.data.take();
            let name = self.name.take();
            return data.map(|data| Event {
                name: name.unwrap_or_else(|| "message".into()),
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
        let stream = b": comment\r\nevent: endpoint\r\ndata: /message?s=1\r\n\r\ndata: {\"a\":\ndata: 1}\n\nid: 3\rdata:x\r\r";
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
        }
    }
}
