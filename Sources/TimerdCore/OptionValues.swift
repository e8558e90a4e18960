/// The single-valued keys a job's options give (`every`, `command`, `timeout`, …), key → value.
///
/// A list searched in order rather than a dictionary: a job gives a handful of the sixty or so keys, and
/// parsing one asks for nearly all of them; with a dictionary each of those lookups hashed its key
/// (SipHash, seeded per lookup), a tenth of the daemon's CPU per pipelined `ADD`
/// (docs/performance.md, "ADD's parsing"). A key appears at most once (the parser refuses repeats), so
/// the list is never longer than the number of keys.
public struct OptionValues: Sendable, Equatable, ExpressibleByDictionaryLiteral {
    private var pairs: [KeyValue] = []

    /// `==`, lengths first: two different keys of one length go to the standard library's slow path
    /// (`_stringCompareWithSmolCheck`), and most keys asked for differ in length from those given.
    private static func same(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && a == b
    }

    public init() {}

    /// The same keys with the same values, in any order.
    public static func == (lhs: OptionValues, rhs: OptionValues) -> Bool {
        lhs.pairs.count == rhs.pairs.count && lhs.pairs.allSatisfy { rhs[$0.key] == $0.value }
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        for (key, value) in elements { self[key] = value }
    }

    /// The pairs of `options`, the last value of a repeated key kept.
    public init(_ options: some Sequence<KeyValue>) {
        for option in options { self[option.key] = option.value }
    }

    public subscript(key: String) -> String? {
        get { pairs.first { Self.same($0.key, key) }?.value }
        set {
            let index = pairs.firstIndex { Self.same($0.key, key) }
            switch (index, newValue) {
            case (let index?, let value?): pairs[index] = KeyValue(key, value)
            case (let index?, nil): pairs.remove(at: index)
            case (nil, let value?): pairs.append(KeyValue(key, value))
            case (nil, nil): break
            }
        }
    }
}
