import Testing
import TimerdCore

@Suite struct CountedTests {
    @Test func oneIsSingularEveryOtherNumberPlural() {
        #expect(1.counted("job") == "1 job")
        #expect(0.counted("job") == "0 jobs")
        #expect(2.counted("running job") == "2 running jobs")
        #expect(1.counted("process", plural: "processes") == "1 process")
        #expect(3.counted("process", plural: "processes") == "3 processes")
    }
}
