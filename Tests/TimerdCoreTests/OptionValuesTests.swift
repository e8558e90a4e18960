import Testing
@testable import TimerdCore

@Suite struct OptionValuesTests {
    @Test func keysAreFoundSetReplacedAndRemoved() {
        var values: OptionValues = ["every": "5s", "command": "true"]
        #expect(values["every"] == "5s" && values["command"] == "true")
        // Absent keys, of the same length as a present one or not.
        #expect(values["count"] == nil && values["timeout"] == nil && values[""] == nil)
        values["every"] = "10s"
        values["timeout"] = "1m"
        #expect(values["every"] == "10s" && values["timeout"] == "1m")
        values["command"] = nil
        values["absent"] = nil
        #expect(values["command"] == nil)
        #expect(values == ["every": "10s", "timeout": "1m"])
        #expect(values == ["timeout": "1m", "every": "10s"])
        #expect(values != ["every": "10s"] && values != ["every": "10s", "timeout": "2m"])
    }

    @Test func fromOptionsTheLastValueOfAKeyIsKept() {
        let values = OptionValues([KeyValue("nice", "5"), KeyValue("memory_max", "1G"), KeyValue("nice", "7")])
        #expect(values["nice"] == "7" && values["memory_max"] == "1G")
    }

    @Test func aSpecsRareKeysReadBackAsSet() throws {
        var spec = try JobSpec(name: JobName("x"), options: [KeyValue("every", "1h"), KeyValue("command", "true")])
        #expect(spec.timezone == nil && spec.env.isEmpty && spec.pool == nil)
        spec.pool = "db"
        spec.env = [KeyValue("A", "1")]
        #expect(spec.pool == "db" && spec.env == [KeyValue("A", "1")])
        // Setting what is there already changes nothing, and back to unset is unset.
        spec.pool = "db"
        spec.pool = nil
        spec.env = []
        #expect(spec == (try JobSpec(name: JobName("x"), options: [KeyValue("every", "1h"), KeyValue("command", "true")])))
    }
}
