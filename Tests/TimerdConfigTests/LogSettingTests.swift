import Testing
import TimerdConfig

@Suite struct LogSettingTests {
    @Test func logTargetIsReadAndChecked() throws {
        #expect(try ConfigLoader.parse("[daemon]\nlog = journal\n").settings.log == "journal")
        #expect(try ConfigLoader.parse("").settings.log == "auto")
        #expect(throws: ConfigErrors.self) { try ConfigLoader.parse("[daemon]\nlog = syslog\n") }
        do {
            _ = try ConfigLoader.parse("[daemon]\nlog = syslog\n", path: "/etc/t.conf")
        } catch {
            #expect(error.description == "/etc/t.conf:2: log: expected auto, journal or stderr, got \"syslog\"")
        }
    }
}
