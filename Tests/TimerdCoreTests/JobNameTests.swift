import Testing
@testable import TimerdCore

@Suite("JobName")
struct JobNameTests {
    static let valid: [String] = [
        "a", "Z", "0", "backup", "backup-db", "backup_db", "backup.db", "Backup.DB-2_x", "...", ".hidden", "-dash",
        "_", "a.", "a..b", "123", String(repeating: "x", count: 63), String(repeating: "x", count: 64),
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXY0123456789_.-", "Z",
    ]

    @Test("valid names", arguments: valid)
    func accepts(text: String) throws {
        let name = try JobName(text)
        #expect(name.rawValue == text)
        #expect(name.description == text)
        #expect("\(name)" == text)
    }

    static let invalid: [(String, String)] = [
        ("", "1 to 64"),
        (String(repeating: "x", count: 65), "1 to 64"),
        (String(repeating: "x", count: 200), "1 to 64"),
        (".", "invalid job name"),
        ("..", "invalid job name"),
        ("a b", "only letters"),
        (" a", "only letters"),
        ("a ", "only letters"),
        ("a\tb", "only letters"),
        ("a\nb", "only letters"),
        ("a/b", "only letters"),
        ("/", "only letters"),
        ("../etc", "only letters"),
        ("a\\b", "only letters"),
        ("a:b", "only letters"),
        ("a=b", "only letters"),
        ("a\"b", "only letters"),
        ("a'b", "only letters"),
        ("a*", "only letters"),
        ("a\u{0}b", "only letters"),
        ("a\u{7F}", "only letters"),
        ("café", "only letters"),
        ("ｊｏｂ", "only letters"),
        ("job😀", "only letters"),
        ("a+b", "only letters"),
        ("a~", "only letters"),
    ]

    @Test("invalid names", arguments: invalid)
    func rejects(text: String, why: String) {
        expectError(.badArgument, key: "name", mentions: ["invalid job name", why]) { try JobName(text) }
    }

    @Test("the length limit counts UTF-8 bytes, not characters")
    func lengthInBytes() {
        #expect(JobName.maxLength == 64)
        // 32 two-byte characters: 64 bytes, rejected for the character anyway, but never for length alone.
        expectError(.badArgument, key: "name", mentions: ["only letters"]) { try JobName(String(repeating: "é", count: 32)) }
        expectError(.badArgument, key: "name", mentions: ["1 to 64"]) { try JobName(String(repeating: "é", count: 33)) }
    }

    @Test("names compare and hash by their text")
    func ordering() throws {
        let names = try ["b", "a", "C", "a-1", "a.1"].map { try JobName($0) }
        #expect(names.sorted().map(\.rawValue) == ["C", "a", "a-1", "a.1", "b"])
        #expect(try JobName("x") == JobName("x"))
        #expect(try JobName("x") != JobName("X"))
        #expect(Set(try ["x", "x", "y"].map { try JobName($0) }).count == 2)
    }
}
