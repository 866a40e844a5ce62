//! The model processor's record of what it sent and received, for the `ModelRequest` event.
//!
//! Built only when someone listens and the wire limit is not 0 (`Bus::records_wire`), once
//! per model request, never per token: the request part copies only the messages no earlier
//! event of the session carried ([`WireTrail::request`]), and refers to the tool set by id (its
//! entries are published once, as `Event::ToolSet`); the response part is taken from the
//! completion assembled at the stream's end ([`answer`]).

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::model::{Completion, ModelClient, ModelError};
use crate::observe::Bus;
use crate::observe::event::now_us;
use crate::observe::wire::{
    ToolSetEvent, WireAnswer, WireCall, WireRequest, cut_strings, cut_text, tool_set_id,
};
use crate::tools::ToolSpec;

/// Where a request's messages stand in the session's numbering (see `WireRequest`).
pub(crate) struct Sending {
    /// Whether the system prompt goes first.
    pub(crate) system: bool,
    /// The number of the first history message sent.
    pub(crate) first: u64,
    /// The first number a rollback has given to other messages since the last record.
    pub(crate) rewound: Option<u64>,
}

/// Per session: how far its events have carried the context, and the last tool set's id.
#[derive(Default)]
pub(crate) struct WireTrail {
    /// The number of the first message no event of this session has carried yet.
    sent_upto: u64,
    /// The specs last offered and their tool-set id (specs are rebuilt only on a change, so
    /// a pointer comparison tells whether the id still holds).
    tool_set: Option<(Arc<[ToolSpec]>, String)>,
    /// A hash of the system message its events last carried: a changed one is carried again.
    system_carried: Option<u64>,
}

impl WireTrail {
    /// The request about to be sent: `messages` as rendered (the system prompt first when
    /// `system`, then the history from message number `first`) and the `specs` offered, with
    /// the client's own fields. Publishes the tool set when the bus has not seen it yet.
    pub(crate) fn request(
        &mut self,
        bus: &Bus,
        client: &ModelClient,
        messages: &[Value],
        sending: &Sending,
        specs: &Arc<[ToolSpec]>,
    ) -> Box<WireRequest> {
        let Sending {
            system,
            first,
            rewound,
        } = *sending;
        if let Some(number) = rewound {
            // Those numbers now name other messages: carry them again, and the system prompt
            // with them (a change carried past them is keyed by a number now reused).
            self.sent_upto = self.sent_upto.min(number);
            self.system_carried = None;
        }
        let limit = bus.wire().bytes();
        let mut wire = client.describe(&Map::new(), !specs.is_empty());
        wire.system = system;
        wire.first = first;
        let history = if system { &messages[1..] } else { messages };
        let end = first + history.len() as u64;
        // The first request of a session carries the system prompt (number 0) too.
        let from = if self.sent_upto == 0 && system {
            0
        } else {
            self.sent_upto.clamp(first, end)
        };
        let mut appended = Vec::with_capacity((end - from) as usize + 1);
        if from == 0 && system {
            appended.push(messages[0].clone());
        }
        let skip = from.max(first) - first;
        appended.extend(history[skip as usize..].iter().cloned());
        for message in &mut appended {
            if cut_strings(message, limit) {
                wire.cut += 1;
            }
        }
        // The system prompt a reload changed since the events last carried it goes with this
        // request (hashed per request only while the wire is recorded).
        if system {
            let hash = {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                match messages[0].get("content").and_then(Value::as_str) {
                    Some(text) => text.hash(&mut h),
                    None => messages[0].to_string().hash(&mut h),
                }
                h.finish()
            };
            // Carried again when it changed, or when none was carried yet (a reload gave a
            // session that had none a prompt; or a rollback forgot which was).
            let carried_as_zero = from == 0;
            if !carried_as_zero && self.system_carried != Some(hash) {
                let mut prompt = messages[0].clone();
                if cut_strings(&mut prompt, limit) {
                    wire.cut += 1;
                }
                wire.system_prompt = Some(prompt);
            }
            self.system_carried = Some(hash);
        }
        wire.from = from;
        wire.appended = appended;
        self.sent_upto = end;
        if !specs.is_empty() {
            wire.tool_count = specs.len();
            wire.tools = Some(self.tool_set_id(bus, specs));
        }
        Box::new(wire)
    }

    fn tool_set_id(&mut self, bus: &Bus, specs: &Arc<[ToolSpec]>) -> String {
        if let Some((known, id)) = &self.tool_set
            && Arc::ptr_eq(known, specs)
        {
            return id.clone();
        }
        let set = tool_set(specs);
        let id = set.id.clone();
        bus.publish_tool_set(&id, || set);
        self.tool_set = Some((specs.clone(), id.clone()));
        id
    }
}

/// `specs` as the tool set a model request offering them names: the OpenAI `tools` entries
/// and their id.
pub(crate) fn tool_set(specs: &[ToolSpec]) -> ToolSetEvent {
    let tools: Vec<Value> = specs
        .iter()
        .map(crate::model::client::openai_tool)
        .collect();
    ToolSetEvent {
        id: tool_set_id(&tools),
        tools,
        at_us: now_us(),
    }
}

/// The text a request `streamed` before it failed or its turn was stopped, cut by `limit`.
pub(crate) fn partial_answer(streamed: &str, limit: usize) -> Box<WireAnswer> {
    let mut content = streamed.to_string();
    cut_text(&mut content, limit);
    Box::new(WireAnswer {
        content,
        ..WireAnswer::default()
    })
}

/// What the model answered: the completion's content, reasoning and calls, each cut by
/// `limit`; for a failed request, the text it `streamed` before it failed (its error and
/// status are in the event and `ModelResponseInfo`).
pub(crate) fn answer(
    result: &Result<Completion, ModelError>,
    streamed: &str,
    limit: usize,
) -> Box<WireAnswer> {
    let Ok(c) = result else {
        return partial_answer(streamed, limit);
    };
    let mut content = c.text.clone();
    cut_text(&mut content, limit);
    let mut reasoning = c.reasoning.clone();
    cut_text(&mut reasoning, limit);
    Box::new(WireAnswer {
        content,
        reasoning,
        tool_calls: c
            .tool_calls
            .iter()
            .map(|call| {
                let mut arguments = call.arguments.clone();
                cut_text(&mut arguments, limit);
                WireCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    arguments,
                }
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelConfig;
    use crate::observe::Event;
    use serde_json::json;

    fn client() -> ModelClient {
        ModelClient::new(ModelConfig::new("http://127.0.0.1:9/v1?token=abc", "m"))
    }

    fn at(system: bool, first: u64) -> Sending {
        Sending {
            system,
            first,
            rewound: None,
        }
    }

    /// One tool, `echo`, as the bot offers it.
    fn echo_specs() -> Arc<[ToolSpec]> {
        vec![ToolSpec {
            name: "echo".into(),
            description: "says it back".into(),
            input_schema: json!({"type": "object"}),
            source: "builtin".into(),
        }]
        .into()
    }

    fn user(n: u64) -> Value {
        json!({"role": "user", "content": format!("line {n}")})
    }

    #[test]
    fn each_request_carries_only_what_is_new_and_names_its_tools() {
        let bus = Bus::default();
        let mut sub = bus.subscribe();
        let mut trail = WireTrail::default();
        let specs = echo_specs();
        let system = json!({"role": "system", "content": "be brief"});
        let one = [system.clone(), user(1)];
        let first = trail.request(&bus, &client(), &one, &at(true, 1), &specs);
        assert_eq!((first.from, first.end()), (0, 2));
        assert_eq!(first.appended, one.to_vec());
        assert!(first.url.ends_with("token=***"), "{}", first.url);
        assert_eq!(first.params["stream"], true);
        let two = [system.clone(), user(1), user(2), user(3)];
        let second = trail.request(&bus, &client(), &two, &at(true, 1), &specs);
        assert_eq!((second.first, second.from, second.end()), (1, 2, 4));
        assert_eq!(second.appended, vec![user(2), user(3)]);
        assert_eq!(second.tools, first.tools);
        // The window forgot messages 1 and 2: the request starts at 3, nothing new but 4.
        let three = [system, user(3), user(4)];
        let third = trail.request(&bus, &client(), &three, &at(true, 3), &specs);
        assert_eq!((third.first, third.from), (3, 4));
        assert_eq!(third.appended, vec![user(4)]);
        // The tool set went out once, with its parameters whole.
        let mut sets = 0;
        while let Some(e) = sub.try_recv() {
            if let Event::ToolSet(t) = &*e {
                sets += 1;
                assert_eq!(Some(&t.id), first.tools.as_ref());
                assert_eq!(
                    t.tools[0]["function"]["parameters"],
                    json!({"type": "object"})
                );
            }
        }
        assert_eq!(sets, 1);
    }

    /// A system prompt a reload changed goes with the next request, and each request is
    /// rebuilt with the prompt it was sent with (tour M: every later request showed the first
    /// prompt, and a copied curl sent it).
    #[test]
    fn a_changed_system_prompt_is_carried_and_each_request_rebuilt_with_its_own() {
        let bus = Bus::default();
        let mut trail = WireTrail::default();
        let none: Arc<[ToolSpec]> = Arc::from(vec![]);
        let one = json!({"role": "system", "content": "PROMPT ONE"});
        let two = json!({"role": "system", "content": "PROMPT TWO"});
        let first = trail.request(
            &bus,
            &client(),
            &[one.clone(), user(1)],
            &at(true, 1),
            &none,
        );
        assert_eq!(first.system_prompt, None, "carried as message 0");
        let same = [one.clone(), user(1), user(2)];
        let second = trail.request(&bus, &client(), &same, &at(true, 1), &none);
        assert_eq!(second.system_prompt, None, "unchanged: not carried again");
        let changed = [two.clone(), user(1), user(2), user(3)];
        let third = trail.request(&bus, &client(), &changed, &at(true, 1), &none);
        assert_eq!(third.system_prompt.as_ref(), Some(&two));
        let later = [two.clone(), user(1), user(2), user(3), user(4)];
        let fourth = trail.request(&bus, &client(), &later, &at(true, 1), &none);
        assert_eq!(fourth.system_prompt, None, "in force since the third");
        let mut book = crate::observe::rebuild::RequestBook::default();
        for q in [&first, &second, &third, &fourth] {
            book.fold(1, q);
        }
        fn prompt(book: &crate::observe::rebuild::RequestBook, q: &WireRequest) -> Value {
            book.whole(1, q).messages[0]["content"].clone()
        }
        assert_eq!(prompt(&book, &first), "PROMPT ONE");
        assert_eq!(prompt(&book, &second), "PROMPT ONE");
        assert_eq!(prompt(&book, &third), "PROMPT TWO");
        assert_eq!(prompt(&book, &fourth), "PROMPT TWO");
        assert_eq!(book.whole(1, &fourth).messages.len(), 5);
        // A rollback gives numbers back: the prompt is carried again with the next request,
        // and the change keyed past it no longer holds (review).
        let rewound = Sending {
            rewound: Some(2),
            ..at(true, 1)
        };
        let three = json!({"role": "system", "content": "PROMPT THREE"});
        let after = [three.clone(), user(1), user(9)];
        let fifth = trail.request(&bus, &client(), &after, &rewound, &none);
        assert_eq!(
            (fifth.from, fifth.system_prompt.as_ref()),
            (2, Some(&three))
        );
        book.fold(1, &fifth);
        let later = [three, user(1), user(9), user(10)];
        let sixth = trail.request(&bus, &client(), &later, &at(true, 1), &none);
        assert_eq!((sixth.from, sixth.system_prompt.as_ref()), (3, None));
        book.fold(1, &sixth);
        assert_eq!(prompt(&book, &fifth), "PROMPT THREE");
        assert_eq!(
            prompt(&book, &sixth),
            "PROMPT THREE",
            "not PROMPT TWO, keyed at a number given back"
        );
    }

    /// A session that had no system prompt is given one by a reload: carried with its next
    /// request (review: never carried, the request rebuilt without it).
    #[test]
    fn a_system_prompt_a_session_had_none_of_is_carried() {
        let bus = Bus::default();
        let mut trail = WireTrail::default();
        let none: Arc<[ToolSpec]> = Arc::from(vec![]);
        let first = trail.request(&bus, &client(), &[user(1)], &at(false, 1), &none);
        let given = json!({"role": "system", "content": "NEW"});
        let second = trail.request(
            &bus,
            &client(),
            &[given.clone(), user(1), user(2)],
            &at(true, 1),
            &none,
        );
        assert_eq!(second.system_prompt.as_ref(), Some(&given));
        let mut book = crate::observe::rebuild::RequestBook::default();
        book.fold(1, &first);
        book.fold(1, &second);
        let whole = book.whole(1, &second);
        assert_eq!((whole.missing, whole.messages.len()), (0, 3));
        assert_eq!(whole.messages[0]["content"], "NEW");
    }

    #[test]
    fn a_rolled_back_turn_is_carried_again() {
        let bus = Bus::default();
        let mut trail = WireTrail::default();
        let none: Arc<[ToolSpec]> = Arc::from(vec![]);
        trail.request(&bus, &client(), &[user(1), user(2)], &at(false, 1), &none);
        // Message 2 was refused and rolled back; another line took its number.
        let rewound = Sending {
            rewound: Some(2),
            ..at(false, 1)
        };
        let again = trail.request(&bus, &client(), &[user(1), user(9)], &rewound, &none);
        assert_eq!((again.from, again.end()), (2, 3));
        assert_eq!(again.appended, vec![user(9)]);
    }

    /// The round cap's last request offers no tools and is sent without `tool_choice` and
    /// `parallel_tool_calls` (servers refuse them alone): it is recorded as sent.
    #[test]
    fn a_request_offering_no_tools_is_recorded_without_tool_settings() {
        let mut config = ModelConfig::new("http://127.0.0.1:9/v1", "m");
        config
            .params
            .insert("tool_choice".into(), json!("required"));
        config
            .params
            .insert("parallel_tool_calls".into(), json!(false));
        config.params.insert("temperature".into(), json!(0.2));
        let client = ModelClient::new(config);
        let bus = Bus::default();
        let none: Arc<[ToolSpec]> = Arc::from(vec![]);
        let w = WireTrail::default().request(&bus, &client, &[user(1)], &at(false, 1), &none);
        assert!(!w.params.contains_key("tool_choice"), "{:?}", w.params);
        assert!(!w.params.contains_key("parallel_tool_calls"));
        assert_eq!(w.params["temperature"], 0.2);
        let specs = echo_specs();
        let w = WireTrail::default().request(&bus, &client, &[user(1)], &at(false, 1), &specs);
        assert_eq!(w.params["tool_choice"], "required");
        assert_eq!(w.params["parallel_tool_calls"], false);
    }

    #[test]
    fn the_key_is_never_recorded_only_that_one_was_sent() {
        let mut config = ModelConfig::new("http://127.0.0.1:9/v1", "m");
        config.api_key = Some("sk-5ecret-key".into());
        config.headers = vec![("X-Org".into(), "org-5ecret".into())];
        let client = ModelClient::new(config);
        let bus = Bus::default();
        let w = WireTrail::default().request(
            &bus,
            &client,
            &[user(1)],
            &at(false, 1),
            &Arc::from(vec![]),
        );
        let text = serde_json::to_string(&w).unwrap();
        assert!(w.keyed && !text.contains("5ecret"), "{text}");
        assert_eq!(w.headers, ["X-Org"]);
    }

    #[test]
    fn long_messages_are_cut_to_the_limit() {
        let bus = Bus::default();
        bus.wire().set(10);
        let mut trail = WireTrail::default();
        let long = [json!({"role": "user", "content": "x".repeat(100)})];
        let w = trail.request(&bus, &client(), &long, &at(false, 1), &Arc::from(vec![]));
        assert_eq!(w.cut, 1);
        let text = w.appended[0]["content"].as_str().unwrap();
        assert!(
            text.starts_with("xxxxxxxxxx…[cut by turnscope: 100 bytes"),
            "{text}"
        );
        assert!(w.tools.is_none());
    }
}
