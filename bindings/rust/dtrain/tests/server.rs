//! Serving: a Server's tokens are generate's, cancel, errors, the statistics.
use std::collections::BTreeMap;
use std::time::Duration;

use dtrain::{Engine, Model, Optimizer, RequestState, Server, Status};

const PROMPTS: [&[i32]; 2] = [&[5, 17, 42, 9], &[3, 1, 4, 1, 5, 9, 2, 6]];

fn model() -> Model {
    Model::gpt(&[("preset", "gpt-tiny".into()), ("seed", 3.into())]).expect("gpt-tiny")
}

fn server(model: &Model) -> Server {
    Server::new(
        None,
        model,
        &[("block_size", 4.into()), ("kv_blocks", 32.into())],
    )
    .expect("server")
}

#[test]
fn two_requests_give_what_generate_gives_each_alone() {
    let model = model();
    let want: Vec<Vec<i32>> = {
        let sgd = Optimizer::new(&model, "sgd", &[("lr", 0.0.into())]).unwrap();
        let mut engine = Engine::new(None, &model, &sgd, &[]).unwrap();
        let greedy = [("max_new_tokens", 5.into()), ("temperature", 0.0.into())];
        PROMPTS
            .iter()
            .map(|p| engine.generate(&[p], &greedy).unwrap().remove(0))
            .collect()
    };
    let server = server(&model);
    assert_eq!(server.model_info().unwrap().0, 64);
    let sampling = [("max_tokens", 5.into()), ("temperature", 0.0.into())];
    let mut requests: Vec<_> = PROMPTS
        .iter()
        .map(|p| server.submit(p, &sampling).unwrap())
        .collect();
    // The server is Sync: read the second request on another thread meanwhile.
    let second = requests.pop().unwrap();
    let mut first = requests.pop().unwrap();
    let got = std::thread::scope(|s| {
        let other = s.spawn(move || {
            let mut r = second;
            let tokens: Vec<i32> = r.by_ref().collect();
            (tokens, r.state())
        });
        let tokens: Vec<i32> = first.by_ref().collect();
        vec![(tokens, first.state()), other.join().unwrap()]
    });
    for (i, (tokens, state)) in got.into_iter().enumerate() {
        assert_eq!(tokens, want[i], "request {i}");
        assert_eq!(state, RequestState::Finished);
    }
    assert_eq!(first.next(), None);
    assert!(
        !first.cancel().unwrap(),
        "an ended request has nothing to cancel"
    );

    let stats = Json::parse(&server.stats_json().unwrap());
    assert_eq!(stats.get("requests").get("finished"), &Json::Num(2.0));
    assert!(server.metrics_text().unwrap().contains("dtrain_requests"));
    server.drain(Duration::from_secs(10)).unwrap();
    let err = server.submit(PROMPTS[0], &[]).unwrap_err();
    assert_eq!(err.status, Status::UNAVAILABLE, "{err}");
}

#[test]
fn cancel_ends_a_long_request() {
    let model = model();
    let server = server(&model);
    // The request takes milliseconds; if one ends before cancel reaches it (a busy
    // machine), cancel says so and the test tries again.
    for _ in 0..5 {
        let mut r = server
            .submit(&[1, 2, 3], &[("max_tokens", 60.into())])
            .unwrap();
        if !r.cancel().unwrap() {
            continue;
        }
        let tokens: Vec<i32> = r.by_ref().collect();
        assert_eq!(r.state(), RequestState::Aborted);
        assert!(tokens.len() < 60, "{} tokens", tokens.len());
        assert!(r.error().is_none());
        return;
    }
    panic!("every request ended before cancel reached it");
}

#[test]
fn bad_options_name_the_key() {
    let model = model();
    let err = Server::new(None, &model, &[("kv_blokcs", 32.into())]).unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
    assert!(err.message.contains("kv_blokcs"), "{err}");
    let mut server = server(&model);
    let err = server
        .submit(&[1, 2], &[("max_tokenz", 3.into())])
        .unwrap_err();
    assert!(err.message.contains("max_tokenz"), "{err}");
    assert_eq!(
        server.submit(&[], &[]).unwrap_err().status,
        Status::INVALID_ARGUMENT
    );
    server.close();
    assert!(server.stats_json().unwrap_err().message.contains("closed"));
    assert_eq!(Status::UNAVAILABLE.name(), "DT_ERR_UNAVAILABLE");
}

/// Just enough JSON for the statistics: objects, arrays, numbers, strings, literals.
#[derive(Debug, PartialEq)]
enum Json {
    Obj(BTreeMap<String, Json>),
    Arr(Vec<Json>),
    Num(f64),
    Str(String),
    Lit(String),
}

impl Json {
    fn parse(text: &str) -> Json {
        let (v, rest) = Json::value(text.trim_start());
        assert!(rest.trim().is_empty(), "trailing text: {rest}");
        v
    }

    fn get(&self, key: &str) -> &Json {
        match self {
            Json::Obj(m) => m.get(key).unwrap_or_else(|| panic!("no key {key}")),
            other => panic!("{other:?} is not an object"),
        }
    }

    fn value(s: &str) -> (Json, &str) {
        let s = s.trim_start();
        if let Some(mut s) = s.strip_prefix('{') {
            let mut m = BTreeMap::new();
            loop {
                s = s.trim_start();
                if let Some(rest) = s.strip_prefix('}') {
                    return (Json::Obj(m), rest);
                }
                let (key, rest) = match Json::value(s) {
                    (Json::Str(key), rest) => (key, rest),
                    (other, _) => panic!("a key: {other:?}"),
                };
                let (v, rest) = Json::value(rest.trim_start().strip_prefix(':').expect(":"));
                m.insert(key, v);
                s = rest.trim_start();
                s = s.strip_prefix(',').unwrap_or(s);
            }
        }
        if let Some(mut s) = s.strip_prefix('[') {
            let mut a = Vec::new();
            loop {
                s = s.trim_start();
                if let Some(rest) = s.strip_prefix(']') {
                    return (Json::Arr(a), rest);
                }
                let (v, rest) = Json::value(s);
                a.push(v);
                s = rest.trim_start();
                s = s.strip_prefix(',').unwrap_or(s);
            }
        }
        if let Some(s) = s.strip_prefix('"') {
            let end = s.find('"').expect("a closing quote");
            return (Json::Str(s[..end].to_string()), &s[end + 1..]);
        }
        let end = s.find(|c| ",}] \n".contains(c)).unwrap_or(s.len());
        let word = &s[..end];
        let v = word
            .parse()
            .map(Json::Num)
            .unwrap_or_else(|_| Json::Lit(word.to_string()));
        (v, &s[end..])
    }
}
