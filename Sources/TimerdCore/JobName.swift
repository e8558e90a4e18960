/// A validated job name: `[A-Za-z0-9_.-]{1,64}`. Validated once, at the edge; everything inside trusts it.
public struct JobName: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: String

    public static let maxLength = 64

    public init(_ text: String) throws(TimerdError) {
        try self.init(text, naming: "job name")
    }

    /// `naming`: what the name is of, for the messages (a mode name is checked as a job name is).
    public init(_ text: String, naming what: String) throws(TimerdError) {
        guard !text.isEmpty, text.utf8.count <= Self.maxLength else {
            throw TimerdError(.badArgument, "invalid \(what) \"\(text)\": must be 1 to \(Self.maxLength) characters", key: "name")
        }
        for byte in text.utf8 {
            let ok = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-")
            guard ok else {
                throw TimerdError(
                    .badArgument, "invalid \(what) \"\(text)\": only letters, digits, '_', '.' and '-' are allowed",
                    key: "name")
            }
        }
        guard text != "." && text != ".." else {
            throw TimerdError(.badArgument, "invalid \(what) \"\(text)\"", key: "name")
        }
        rawValue = text
    }

    public var description: String { rawValue }

    public static func < (lhs: JobName, rhs: JobName) -> Bool { lhs.rawValue < rhs.rawValue }
}
