import TimerdCore
import TimerdProtocol

/// A job's options as stored: a JSON array of `[key, value]` pairs, in order, e.g.
/// `[["every","5m"],["env","A=b"]]`. Readable with the `sqlite3` shell (`json_each`) and unambiguous
/// whatever the values hold. Written and read with timerd's one JSON codec (`Payload`): non-ASCII text
/// as is (UTF-8), quotes, backslashes and control characters escaped.
enum OptionsCoding {
    /// Byte for byte what `Payload.encode` writes for the pairs, without an encoder per job (at a
    /// pipelined `ADD` per job, the encoder was a noticeable part of the store's time).
    /// The bytes are reserved at once, and the punctuation appended as bytes (a writer's call per
    /// bracket and each doubling of the buffer were most of an `ADD`'s encoding).
    static func encode(_ options: [KeyValue]) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(options.reduce(2) { $0 + $1.key.utf8.count + $1.value.utf8.count + 8 })
        bytes.append(UInt8(ascii: "["))
        for (index, option) in options.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(UInt8(ascii: "["))
            JSONBytes.appendQuoted(option.key, to: &bytes)
            bytes.append(UInt8(ascii: ","))
            JSONBytes.appendQuoted(option.value, to: &bytes)
            bytes.append(UInt8(ascii: "]"))
        }
        bytes.append(UInt8(ascii: "]"))
        return String(decoding: bytes, as: UTF8.self)
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
