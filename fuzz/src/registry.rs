//! What the schema-registry targets share: parse a schema as the registry
//! does on registration, and check that what it would store parses again to
//! the same schema (what it stores, it can load at the next start).

use es_registry::format;
use es_registry::model::SchemaType;

/// Parses `text` as registration does (`stored_text`, then `parse` and
/// `identity`); when it parses, the stored text must parse again to the
/// same identity, and for Protobuf the compiled file printed as a
/// descriptor must compile to the same identity too.
pub fn parse_and_reload(t: SchemaType, text: &str, normalize: bool) {
    let Ok(stored) = format::stored_text(t, text, normalize) else {
        return;
    };
    let Ok(parsed) = format::parse(t, &stored, &[]) else {
        return;
    };
    let id = format::identity(&parsed, &stored);
    let again = format::parse(t, &stored, &[]).expect("the stored text parses again");
    assert_eq!(format::identity(&again, &stored), id, "identity is stable");
    if let format::Parsed::Protobuf(p) = &parsed {
        let file = p.file().expect("the schema's own file");
        let printed = format::proto_text::print(file.file_descriptor_proto());
        match format::parse(t, &printed, &[]) {
            Ok(reprinted) => assert_eq!(
                format::identity(&reprinted, &printed),
                id,
                "a compiled file printed as a descriptor is the same schema:\n{printed}"
            ),
            Err(e) => {
                panic!("a compiled file printed as a descriptor does not compile: {e:?}\n{printed}")
            }
        }
    }
}
