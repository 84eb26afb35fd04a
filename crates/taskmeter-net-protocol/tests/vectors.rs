//! The crate held to the handshake's vectors (protocol/vectors/net/handshake.json): the bytes of
//! the challenge and of each sender's hello, what a sender takes for a challenge, and the verdict
//! a receiver gives each hello of a sequence, judged in order against one roll.

use serde_json::Value;
use taskmeter_net_protocol::{
    judge, unhex, Challenge, Hello, Refusal, Roll, CHALLENGE_BYTES, HELLO_BYTES, INDEX_TAKEN, WRONG_TOKEN,
};

fn vectors() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../protocol/vectors/net/handshake.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn bytes<const N: usize>(value: &Value) -> [u8; N] {
    let text = value.as_str().expect("hexadecimal digits");
    let all: Vec<u8> = (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect();
    all.try_into().unwrap_or_else(|all: Vec<u8>| panic!("{} bytes, not {N}: {text}", all.len()))
}

fn number(value: &Value) -> u32 {
    u32::try_from(value.as_u64().expect("a number")).unwrap()
}

fn tokens(v: &Value) -> Vec<[u8; 32]> {
    v["tokens"].as_array().unwrap().iter().map(|t| unhex(t.as_str().unwrap()).expect("a token")).collect()
}

#[test]
fn the_challenge_is_its_vector_both_ways() {
    let v = vectors();
    let challenge = Challenge {
        nonce: unhex(v["nonce"].as_str().unwrap()).expect("a nonce"),
        connections: number(&v["connections"]),
        message_size: number(&v["message_size"]),
    };
    let wire: [u8; CHALLENGE_BYTES] = bytes(&v["challenge"]);
    assert_eq!(challenge.to_bytes(), wire);
    assert_eq!(Challenge::from_bytes(&wire), Some(challenge));
    for not in v["not_challenges"].as_array().unwrap() {
        assert_eq!(Challenge::from_bytes(&bytes(&not["bytes"])), None, "{}", not["what"]);
    }
}

#[test]
fn each_sender_s_hello_is_its_vector_both_ways() {
    let v = vectors();
    let hellos = v["hellos"].as_array().unwrap();
    assert_eq!(hellos.len(), number(&v["connections"]) as usize);
    for (index, (token, wire)) in tokens(&v).into_iter().zip(hellos).enumerate() {
        let hello = Hello { index: index as u32, token };
        let wire: [u8; HELLO_BYTES] = bytes(wire);
        assert_eq!(hello.to_bytes(), wire, "sender {index}");
        assert_eq!(Hello::from_bytes(&wire), Some(hello), "sender {index}");
    }
}

#[test]
fn each_hello_gets_its_verdict_in_order() {
    let v = vectors();
    let tokens = tokens(&v);
    // The same sequence three ways: a roll, as the receivers judge; judge() over plain slots; and
    // the verdicts by their bytes, as the wire carries them.
    let roll = Roll::new(tokens.clone());
    let mut joined = vec![false; tokens.len()];
    let mut joins = 0;
    for case in v["judged"].as_array().unwrap() {
        let what = &case["what"];
        let hello: [u8; HELLO_BYTES] = bytes(&case["hello"]);
        let verdict = roll.judge(&hello);
        assert_eq!(judge(&hello, &tokens, &mut joined), verdict, "{what}");
        match (&case["joins"], verdict) {
            (Value::Number(index), Ok(got)) => {
                assert_eq!(got as u64, index.as_u64().unwrap(), "{what}");
                joins += 1;
            }
            (Value::Null, Err(refusal)) => {
                let expected = case["verdict"].as_str().unwrap().as_bytes();
                assert_eq!(&refusal.verdict()[..], expected, "{what}");
                assert!([WRONG_TOKEN, INDEX_TAKEN].contains(&refusal.verdict()), "{what}");
                assert_eq!(refusal.to_string(), case["reason"].as_str().unwrap(), "{what}");
            }
            (expected, got) => panic!("{what}: expected {expected}, got {got:?}"),
        }
        assert_eq!(roll.joined(), joins, "{what}");
    }
    assert_eq!(joined, vec![true; tokens.len()], "every sender of the vectors joins once");
    // Every kind of refusal has a vector.
    let kinds: Vec<&str> = v["judged"].as_array().unwrap().iter().filter_map(|c| c["reason"].as_str()).collect();
    for refusal in [Refusal::NotASender, Refusal::NotOfThisPoint(2), Refusal::WrongToken(0), Refusal::AlreadyJoined(0)]
    {
        assert!(kinds.contains(&refusal.to_string().as_str()), "no vector for {refusal:?}");
    }
}
