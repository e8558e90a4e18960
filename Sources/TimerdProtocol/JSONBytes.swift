/// JSON written a value at a time into bytes, as `Payload.encode` writes it: no spaces, `/` not escaped,
/// strings escaped the same way, doubles in the same form. For output an encoder is too slow for: a `LIST`
/// of 100,000 jobs (60 MB), `timerctl simulate --json` (a million lines). The caller writes keys in
/// `Payload`'s order (sorted) and the punctuation, with `raw`.
public struct JSONBytes: Sendable {
    public private(set) var bytes: [UInt8] = []

    public init(capacity: Int = 0) {
        bytes.reserveCapacity(capacity)
    }

    /// Punctuation and keys, as they are (`{"name":`, `,`, `]`).
    public mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    public mutating func null() { raw("null") }

    public mutating func bool(_ value: Bool) { raw(value ? "true" : "false") }

    public mutating func string(_ value: String?) {
        guard let value else { return null() }
        Self.appendQuoted(value, to: &bytes)
    }

    public mutating func integer(_ value: (some BinaryInteger)?) {
        guard let value else { return null() }
        guard let small = Int(exactly: value) else {
            bytes += String(value).utf8
            return
        }
        // Digits written in place: `String(value)` per number was a tenth of a large `LIST`.
        if small < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = small.magnitude
        let end = bytes.count
        repeat {
            bytes.append(UInt8(ascii: "0") + UInt8(magnitude % 10))
            magnitude /= 10
        } while magnitude > 0
        bytes[end...].reverse()
    }

    /// As `JSONEncoder` writes a double: its shortest form, without a trailing `.0`.
    public mutating func number(_ value: Double?) {
        guard let value else { return null() }
        precondition(value.isFinite, "JSON has no \(value)")
        let text = value.description
        bytes += (text.hasSuffix(".0") ? text.dropLast(2) : Substring(text)).utf8
    }

    /// `["a","b"]`.
    public mutating func strings(_ values: [String]) {
        bytes.append(UInt8(ascii: "["))
        for (index, value) in values.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            Self.appendQuoted(value, to: &bytes)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// What `Payload.encode` writes for `value`.
    public mutating func appendEncoded(_ value: some Encodable) {
        bytes += Payload.encode(value).utf8
    }

    /// Another writer's bytes after these.
    public mutating func append(_ other: JSONBytes) {
        bytes += other.bytes
    }

    /// `value` as a JSON string: `"` and `\` escaped, control characters as `\n`, `\t`, … or `\u00XX`;
    /// everything else (DEL, U+2028, any non-ASCII) as it is.
    public static func appendQuoted(_ value: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        let plain = value.utf8.withContiguousStorageIfAvailable { utf8 -> Bool in
            guard !utf8.contains(where: needsEscape) else { return false }
            bytes.append(contentsOf: utf8)
            return true
        }
        if plain != true {
            for byte in value.utf8 {
                guard needsEscape(byte) else {
                    bytes.append(byte)
                    continue
                }
                bytes.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
                case UInt8(ascii: "\n"): bytes.append(UInt8(ascii: "n"))
                case UInt8(ascii: "\r"): bytes.append(UInt8(ascii: "r"))
                case UInt8(ascii: "\t"): bytes.append(UInt8(ascii: "t"))
                case 0x08: bytes.append(UInt8(ascii: "b"))
                case 0x0C: bytes.append(UInt8(ascii: "f"))
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    bytes += [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
                }
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }
}
