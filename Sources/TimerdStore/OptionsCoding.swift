import TimerdCore
import TimerdProtocol

/// A job's options as stored: a JSON array of `[key, value]` pairs, in order, e.g.
/// `[["every","5m"],["env","A=b"]]`. Readable with the `sqlite3` shell (`json_each`) and unambiguous
/// whatever the values hold. Written and read with timerd's one JSON codec (`Payload`): non-ASCII text
/// as is (UTF-8), quotes, backslashes and control characters escaped.
enum OptionsCoding {
    /// Byte for byte what `Payload.encode` writes for the pairs, without an encoder per job (at a
    /// pipelined `ADD` per job, the encoder was a noticeable part of the store's time).
    static func encode(_ options: [KeyValue]) -> String {
        var json = JSONBytes()
        json.raw("[")
        for (index, option) in options.enumerated() {
            json.raw(index == 0 ? "[" : ",[")
            json.string(option.key)
            json.raw(",")
            json.string(option.value)
            json.raw("]")
        }
        json.raw("]")
        return String(decoding: json.bytes, as: UTF8.self)
    }

    /// Parses what `encode` writes (and any JSON of that shape); throws on anything else.
    static func decode(_ text: String) throws(StoreError) -> [KeyValue] {
        let pairs: [[String]]
        do {
            pairs = try Payload.decode([[String]].self, from: text)
        } catch {
            throw StoreError("stored job options are not a JSON array of [key, value] pairs: \(error)")
        }
        return try pairs.map { pair throws(StoreError) in
            guard pair.count == 2 else {
                throw StoreError("stored job options are not a JSON array of [key, value] pairs: a pair has \(pair.count) elements")
            }
            return KeyValue(pair[0], pair[1])
        }
    }
}
