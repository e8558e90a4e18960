import Testing
import TimerdProtocol

@Suite struct ReplyEscapeTests {
    @Test func controlCharactersInMessagesAreEscaped() {
        let reply = Reply.err(code: "unknown-verb", message: "unknown verb '\u{1B}[2J\u{0}\u{7F}'\ttab")
        #expect(reply.encode() == "ERR unknown-verb unknown verb '\\x1B[2J\\x00\\x7F'\ttab")
        #expect(!reply.encode().unicodeScalars.contains { $0.value == 0x1B })
    }
}
