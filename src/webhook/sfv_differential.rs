//! Differential tests of the structured-field subset parser against the `sfv` crate (RFC 8941 mode).
//! They must never compare against hard-coded answers only: every input goes through both parsers.

use super::*;
use proptest::prelude::*;
use sfv::{FieldType, Parser as CrateParser, Version};

/// Our bare item with a decimal as its value times 1000, so both sides compare by value.
fn norm_bare(b: &Bare) -> Bare {
    match b {
        Bare::Decimal(text) => {
            let neg = text.starts_with('-');
            let (int, frac) = text
                .trim_start_matches('-')
                .split_once('.')
                .expect("a parsed decimal has a dot");
            let scaled = int.parse::<i64>().expect("digits") * 1000
                + format!("{frac:0<3}").parse::<i64>().expect("digits");
            Bare::Decimal((if neg { -scaled } else { scaled }).to_string())
        }
        other => other.clone(),
    }
}

fn norm_params(p: &Params) -> Params {
    p.iter().map(|(k, v)| (k.clone(), norm_bare(v))).collect()
}

fn norm_item(i: &Item) -> Item {
    Item {
        bare: norm_bare(&i.bare),
        params: norm_params(&i.params),
    }
}

fn ours(input: &str) -> Result<Vec<(String, Member)>, SfvError> {
    dictionary(input).map(|d| {
        d.into_iter()
            .map(|(k, m)| {
                let m = match m {
                    Member::Item(i) => Member::Item(norm_item(&i)),
                    Member::InnerList(items, p) => {
                        Member::InnerList(items.iter().map(norm_item).collect(), norm_params(&p))
                    }
                };
                (k, m)
            })
            .collect()
    })
}

fn from_crate_bare(b: &sfv::BareItem) -> Bare {
    match b {
        sfv::BareItem::Integer(i) => Bare::Integer(i64::from(*i)),
        sfv::BareItem::Decimal(d) => {
            Bare::Decimal(i64::from(d.as_integer_scaled_1000()).to_string())
        }
        sfv::BareItem::String(s) => Bare::String(s.as_str().to_owned()),
        sfv::BareItem::Token(t) => Bare::Token(t.as_str().to_owned()),
        sfv::BareItem::ByteSequence(b) => Bare::Bytes(b.clone()),
        sfv::BareItem::Boolean(b) => Bare::Boolean(*b),
        other => panic!("RFC 8941 mode produced an RFC 9651 item: {other:?}"),
    }
}

fn from_crate_params(p: &sfv::Parameters) -> Params {
    p.iter()
        .map(|(k, v)| (k.as_str().to_owned(), from_crate_bare(v)))
        .collect()
}

fn from_crate_item(i: &sfv::Item) -> Item {
    Item {
        bare: from_crate_bare(&i.bare_item),
        params: from_crate_params(&i.params),
    }
}

fn from_crate(d: &sfv::Dictionary) -> Vec<(String, Member)> {
    d.iter()
        .map(|(k, e)| {
            let m = match e {
                sfv::ListEntry::Item(i) => Member::Item(from_crate_item(i)),
                sfv::ListEntry::InnerList(l) => Member::InnerList(
                    l.items.iter().map(from_crate_item).collect(),
                    from_crate_params(&l.params),
                ),
            };
            (k.as_str().to_owned(), m)
        })
        .collect()
}

fn theirs(input: &str) -> Result<Vec<(String, Member)>, sfv::Error> {
    CrateParser::new(input)
        .with_version(Version::Rfc8941)
        .parse::<sfv::Dictionary>()
        .map(|d| from_crate(&d))
}

/// Both parsers accept with equal values, or both refuse.
fn agree(input: &str) {
    match (ours(input), theirs(input)) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "values differ for {input:?}"),
        (Err(_), Err(_)) => {}
        (a, b) => panic!("parsers disagree on {input:?}: ours {a:?}, sfv {b:?}"),
    }
}

const VALID: &[&str] = &[
    // Signature-Input and Signature as RFC 9421 writes them.
    r#"sig1=("@method" "@authority" "@path" "content-digest" "content-type");created=1618884473;keyid="test-key-rsa-pss""#,
    r#"sig-b21=();created=1618884473;keyid="test-key-rsa-pss";nonce="b3k2pp5k7z-50gnwp.yemd""#,
    r#"sig1=("@query-param";name="Pet" "@request-response";key="sig1");created=1618884475;alg="ed25519";tag="x""#,
    "sig1=:P0wLUszWQjoi54udOtydf9IWTfNhy+r53jGFj9XZuP4uKwxyJo1RSHi+oEF1FuX6O29d+lbxwwBao1BAgadijW+7O/PyezlTnqAOVPWx9GlyntiCiHzC87qmSQjvu1CFyFuWSjdGa3qLYYlNm7pVaJFalQiKWnUaqfT4LyttaXyoyZW84jS8gyarxAiWI97mPXU+OVM64+HVBHmnEsS+lTeIsEQo36T3NFf2CujWARPQg53r58RmpZ+J9eKR2CD6IJQvacn5A4Ix5BUAVGqlyp8JYm+S/CWJi31PNUjRRCusCVRj05NrxABNFv3r5S9IXf2fYJK+eyW4AiGVMvMcOg==:",
    r#"sig1=:AAEC:, sig2=:/w==:"#,
    // Content-Digest with several algorithms.
    "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:, sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:",
    // Whitespace: leading/trailing SP, OWS around commas, SP inside inner lists.
    "  a=1",
    "a=1   ",
    "a=1 ,\tb=2",
    "a=1,b=2",
    "a=(  1   2  )",
    "a=( )",
    "a=();p",
    "a=1;  p=2",
    // Byte sequences: empty, unpadded, non-zero pad bits.
    "a=::",
    "a=:AAE:",
    "a=:AAF=:",
    // Tokens.
    "a=abc, b=*x/y:z, c=A1!#$%&'*+-.^_`|~",
    // Decimals and integers at their limits.
    "a=1.5, b=-0.001, c=123456789012.123, d=0.0",
    "a=999999999999999, b=-999999999999999, c=0, d=-0",
    "a=007",
    // Booleans: bare keys, `?0`/`?1`, as parameters.
    "a, b=?0, c=?1;x;y=?0",
    "a;p=1",
    // Strings with escapes.
    r#"a="", b="\"\\", c=" !~""#,
    // Duplicate keys: the last value wins, the first position stays.
    "a=1, b=2, a=3",
    "a=1;p=1;q=2;p=3",
    "a=(1;x=1;x=2)",
    // Keys.
    "*=1, a-b_c.d*9=2",
    // Empty field.
    "",
    "   ",
];

const INVALID: &[&str] = &[
    // Keys.
    "Sig=1",
    "1a=1",
    "a b=1",
    "-a=1",
    "\ta=1",
    // Trailing and doubled commas.
    "a=1,",
    "a=1, ",
    "a=1,,b=2",
    ",a=1",
    // Separators.
    "a=1 b=2",
    "a=1;",
    "a=1;P=2",
    "a=(1 2",
    "a=(1,2)",
    "a=(1 (2))",
    "a=(1)x",
    "a=",
    // Numbers.
    "a=1234567890123456",
    "a=-1234567890123456",
    "a=1.",
    "a=.5",
    "a=-",
    "a=-.5",
    "a=1.2345",
    "a=1234567890123.1",
    "a=1.2.3",
    // Strings.
    "a=\"unterminated",
    "a=\"\u{e9}\"",
    "a=\"tab\there\"",
    r#"a="\x""#,
    // Byte sequences.
    "a=:not base64!:",
    "a=:AAE",
    "a=:A=AE:",
    "a=:a-b_:",
    // Booleans.
    "a=?2",
    "a=?",
    "a=?true",
    // RFC 9651 additions signatures never use: dates and display strings.
    "a=@1659578233",
    r#"a=%"caf%c3%a9""#,
    // Stray bytes.
    "a=1\u{0}",
    "a=<",
];

#[test]
fn table_agrees_with_the_sfv_crate() {
    for input in VALID {
        assert!(ours(input).is_ok(), "ours refused valid {input:?}");
        agree(input);
    }
    for input in INVALID {
        assert!(ours(input).is_err(), "ours accepted invalid {input:?}");
        agree(input);
    }
}

fn key() -> impl Strategy<Value = sfv::Key> {
    "[a-z*][a-z0-9_.*-]{0,6}".prop_map(|k| sfv::Key::from_string(k).expect("key"))
}

fn bare() -> impl Strategy<Value = sfv::BareItem> {
    prop_oneof![
        (-999_999_999_999_999i64..=999_999_999_999_999)
            .prop_map(|i| sfv::BareItem::Integer(sfv::Integer::try_from(i).expect("range"))),
        (-999_999_999_999_999i64..=999_999_999_999_999).prop_map(|i| sfv::BareItem::Decimal(
            sfv::Decimal::from_integer_scaled_1000(sfv::Integer::try_from(i).expect("range"))
        )),
        "[ -~]{0,12}"
            .prop_map(|s| sfv::BareItem::String(sfv::String::from_string(s).expect("string"))),
        "[A-Za-z*][A-Za-z0-9!#$%&'*+.^_`|~:/-]{0,8}"
            .prop_map(|t| sfv::BareItem::Token(sfv::Token::from_string(t).expect("token"))),
        proptest::collection::vec(any::<u8>(), 0..20).prop_map(sfv::BareItem::ByteSequence),
        any::<bool>().prop_map(sfv::BareItem::Boolean),
    ]
}

fn params() -> impl Strategy<Value = sfv::Parameters> {
    proptest::collection::vec((key(), bare()), 0..3).prop_map(|v| v.into_iter().collect())
}

fn item() -> impl Strategy<Value = sfv::Item> {
    (bare(), params()).prop_map(|(b, p)| sfv::Item::with_params(b, p))
}

fn entry() -> impl Strategy<Value = sfv::ListEntry> {
    prop_oneof![
        item().prop_map(sfv::ListEntry::Item),
        (proptest::collection::vec(item(), 0..4), params())
            .prop_map(|(i, p)| sfv::ListEntry::InnerList(sfv::InnerList::with_params(i, p))),
    ]
}

proptest! {
    #[test]
    fn dictionaries_serialised_by_the_crate_parse_alike(
        members in proptest::collection::vec((key(), entry()), 1..5)
    ) {
        let dict: sfv::Dictionary = members.into_iter().collect();
        let text = dict.serialize().expect("a non-empty dictionary serialises");
        prop_assert_eq!(ours(&text).expect("ours parses the crate's output"), from_crate(&dict));
    }

    #[test]
    fn random_text_gets_the_same_verdict(input in "[a-cA=(),;:?\"*/+0-9. \t-]{0,30}") {
        agree(&input);
    }
}
