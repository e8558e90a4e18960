import Testing
@testable import TimerdCore

@Suite("TimerdError and Limits")
struct TimerdErrorTests {
    @Test("equality compares the code only")
    func equality() {
        #expect(TimerdError(.badArgument, "one", key: "a") == TimerdError(.badArgument, "two"))
        #expect(TimerdError(.badArgument, "same") != TimerdError(.missingArgument, "same"))
        #expect(TimerdError(.noSuchJob, "x", key: "k") != TimerdError(.exists, "x", key: "k"))
        for code in TimerdError.Code.allCases {
            for other in TimerdError.Code.allCases {
                #expect((TimerdError(code, "m", key: "k") == TimerdError(other, "n")) == (code == other))
            }
        }
    }

    @Test("fields and description")
    func fields() {
        let error = TimerdError(.badArgument, "every: too short", key: "every")
        #expect(error.code == .badArgument)
        #expect(error.message == "every: too short")
        #expect(error.key == "every")
        #expect(error.description == "bad-argument: every: too short")
        #expect(TimerdError(.internal, "boom").key == nil)
        #expect("\(TimerdError(.noSuchJob, "no job x"))" == "no-such-job: no job x")
    }

    @Test("every code is kebab-case", arguments: TimerdError.Code.allCases)
    func kebabCase(code: TimerdError.Code) {
        let raw = code.rawValue
        let parts = raw.split(separator: "-", omittingEmptySubsequences: false)
        #expect(!raw.isEmpty)
        #expect(parts.allSatisfy { !$0.isEmpty && $0.allSatisfy { ("a"..."z").contains($0) } }, "\(raw)")
        #expect(TimerdError.Code(rawValue: raw) == code)
    }

    @Test("codes are unique and stable")
    func unique() {
        let raws = TimerdError.Code.allCases.map(\.rawValue)
        #expect(Set(raws).count == raws.count)
        #expect(raws == [
            "unknown-verb", "bad-argument", "missing-argument", "bad-quoting", "line-too-long", "bad-encoding",
            "no-such-job", "exists", "declared-in-config", "finished", "busy", "invalid-config", "permission-denied",
            "too-many-jobs", "rate-limited", "too-many-connections", "idle-timeout", "cluster-unavailable", "storage-unavailable", "shutting-down",
            "internal",
        ])
    }

    @Test("limits have their documented defaults")
    func limits() {
        #expect(Limits.maxLineBytes == 65_536)
        #expect(Limits.outputTailBytes == 4_096)
        #expect(Limits.maxLoggedLineBytes == 2_048)
        #expect(Limits.defaultMaxRunning == 64)
        #expect(Limits.defaultKillGrace == .seconds(5))
        #expect(Limits.defaultStopGrace == .seconds(10))
        #expect(Limits.minimumInterval == .milliseconds(10))
        #expect(Limits.minimumInterval < DurationText.maximum)
        // The access limits (docs/security.md).
        #expect(Limits.defaultMaxConnections == 16_384 && Limits.defaultMaxConnectionsPerUser == 256)
        #expect(Limits.defaultMaxRequestRate == 200 && Limits.defaultIdleTimeout == .seconds(300))
        #expect(Limits.defaultUserMaxJobs == 1_000 && Limits.defaultUserMaxRunsPerMinute == 600)
        #expect(Limits.defaultMaxOutputMemory == 64 << 20)
    }
}
