import Testing
import TimerdCore

/// The resource keys of a job (`docs/configuration.md`, "Resource control"): what they accept, how they
/// are written back, what they write to a cgroup, and per-user ceilings.
@Suite struct ResourceSettingsTests {
    static func spec(_ options: [(String, String)]) throws -> JobSpec {
        try JobSpec(name: JobName("r"), options: ([("every", "1m"), ("command", "x")] + options).map { KeyValue($0.0, $0.1) })
    }

    @Test func everyKeyIsReadAndWrittenBackCanonically() throws {
        let spec = try Self.spec([
            ("memory_max", "1024M"), ("memory_high", "768MiB"), ("memory_swap_max", "0"), ("cpu_quota", "150%"),
            ("cpu_weight", "20"), ("io_weight", "10000"), ("tasks_max", "infinity"), ("nice", "-5"),
            ("ionice", "best-effort"), ("oom_score_adj", "-1000"), ("limit_nofile", "1024:4096"), ("limit_core", "0"),
            ("limit_cpu", "1.5s"), ("limit_as", "infinity"), ("limit_rttime", "2ms"), ("limit_stack", "8M:infinity"),
        ])
        let resources = spec.resources
        #expect(resources.memoryMax == .value(1 << 30) && resources.memoryHigh == .value(768 << 20))
        #expect(resources.memorySwapMax == .value(0) && resources.cpuQuota == 150 && resources.tasksMax == .infinity)
        #expect(resources.nice == -5 && resources.ionice == IOPriority(.bestEffort, level: 4) && resources.oomScoreAdj == -1000)
        #expect(resources.limit(.nofile) == ProcessLimit(.nofile, soft: .value(1024), hard: .value(4096)))
        #expect(resources.limit(.cpu) == ProcessLimit(.cpu, soft: .value(2), hard: .value(2)))  // rounded up, as systemd
        #expect(resources.limit(.rttime) == ProcessLimit(.rttime, soft: .value(2000), hard: .value(2000)))
        let written = spec.options.filter { ResourceSettings.keys.contains($0.key) }.map { "\($0.key)=\($0.value)" }
        #expect(written == [
            "memory_max=1G", "memory_high=768M", "memory_swap_max=0", "cpu_quota=150%", "cpu_weight=20", "io_weight=10000",
            "tasks_max=infinity", "nice=-5", "ionice=best-effort:4", "oom_score_adj=-1000", "limit_cpu=2s",
            "limit_stack=8M:infinity", "limit_core=0", "limit_nofile=1024:4096", "limit_as=infinity", "limit_rttime=2ms",
        ])
        #expect(try JobSpec(name: JobName("r"), options: spec.options) == spec)
        #expect(resources.cgroupFiles.map { "\($0.file)=\($0.value)" } == [
            "memory.max=1073741824", "memory.high=805306368", "memory.swap.max=0", "cpu.max=150000 100000",
            "cpu.weight=20", "io.weight=default 10000", "pids.max=max",
        ])
        #expect(resources.cgroupSettings.map(\.controller) == ["memory", "memory", "memory", "cpu", "cpu", "io", "pids"])
        #expect(IOPriority(.realtime, level: 0).kernelValue == 1 << 13 && IOPriority(.idle).kernelValue == 3 << 13)
    }

    @Test func aJobWithoutThemHasNone() throws {
        let spec = try Self.spec([])
        #expect(spec.resources.isEmpty && spec.resources.cgroupFiles.isEmpty)
    }

    @Test("bad values are refused with their key", arguments: [
        ("memory_max", "0", "a size like 512M"), ("memory_max", "lots", "a size like 512M"), ("cpu_quota", "50", "percentage"),
        ("cpu_quota", "0%", "percentage"), ("cpu_weight", "0", "from 1 to 10000"), ("io_weight", "10001", "from 1 to 10000"),
        ("tasks_max", "0", "from 1 to"), ("nice", "20", "from -20 to 19"), ("nice", "-21", "from -20 to 19"),
        ("nice", "+3", "whole number"), ("ionice", "idle:3", "idle, best-effort"), ("ionice", "realtime:8", "N from 0 to 7"),
        ("ionice", "fast", "idle, best-effort"), ("oom_score_adj", "1001", "from -1000 to 1000"),
        ("limit_nofile", "-1", "a whole number"), ("limit_nofile", "10:5", "soft limit"), ("limit_core", "1X", "a size"),
        ("limit_cpu", "soon", "a duration"), ("limit_nofile", "1:2:3", "a whole number"),
    ])
    func badValues(key: String, value: String, mention: String) {
        #expect {
            try Self.spec([(key, value)])
        } throws: { error in
            guard let error = error as? TimerdError else { return false }
            return error.code == .badArgument && error.key == key && error.message.contains(mention)
        }
    }

    @Test func webhooksTakeNone() {
        for key in ResourceSettings.keys {
            #expect(throws: TimerdError.self) {
                try JobSpec(name: JobName("w"), options: [KeyValue("every", "1m"), KeyValue("webhook", "http://127.0.0.1/"),
                                                          KeyValue(key, "1")])
            }
        }
    }

    @Test func aCeilingCapsWhatIsSetAndSetsWhatIsNot() throws {
        let ceiling = try ResourceSettings(single: ["memory_max": "1G", "cpu_quota": "50%", "limit_nofile": "1024"])
        let modest = try ResourceSettings(single: ["memory_max": "512M", "nice": "5"])
        let capped = modest.capped(by: ceiling)
        #expect(capped.memoryMax == .value(512 << 20) && capped.cpuQuota == 50 && capped.nice == 5)
        #expect(capped.limit(.nofile) == ProcessLimit(.nofile, soft: .value(1024), hard: .value(1024)))
        #expect(modest.aboveCeiling(ceiling) == nil)
        let greedy = try ResourceSettings(single: ["memory_max": "2G", "limit_nofile": "100:4096"])
        #expect(greedy.aboveCeiling(ceiling) == "memory_max=2G is above user_memory_max=1G")
        let files = try ResourceSettings(single: ["limit_nofile": "100:4096"])
        #expect(files.aboveCeiling(ceiling) == "limit_nofile=100:4096 is above user_limit_nofile=1024")
        #expect(try ResourceSettings(single: ["cpu_quota": "80%"]).aboveCeiling(ceiling) == "cpu_quota=80% is above user_cpu_quota=50%")
        #expect(ResourceSettings().capped(by: ResourceSettings()) == ResourceSettings())
    }

    @Test func sizesAreWrittenInTheLargestExactUnit() {
        #expect(ByteCount.format(1 << 30) == "1G" && ByteCount.format(3 << 40) == "3T" && ByteCount.format(1536) == "1536"
            && ByteCount.format(0) == "0" && ByteCount.format(1536 << 10) == "1536K")
        #expect(ByteCount.parse("2T") == 2 << 40 && ByteCount.parse("2TiB") == 2 << 40)
    }
}
