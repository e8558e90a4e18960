import Testing
import TimerdConfig
import TimerdCore

/// The `[cluster]` section (docs/cluster.md).
@Suite struct ClusterSettingTests {
    @Test func withoutTheSectionThereIsNoCluster() throws {
        #expect(try #require(configuration("[daemon]\nmax_running = 4\n")).settings.cluster == nil)
    }

    @Test func everyKeyIsRead() throws {
        let cluster = try #require(configuration("""
            [cluster]
            etcd = http://10.0.0.1:2379, https://10.0.0.2:2379
            ca_file = tls/ca.pem
            cert_file = /etc/timerd/node.pem
            key_file = node.key
            prefix = /prod/timerd
            node = web-1.example
            lease_ttl = 15s
            tags = ssd, eu-west
            """)?.settings.cluster)
        #expect(cluster.endpoints == ["http://10.0.0.1:2379", "https://10.0.0.2:2379"])
        #expect(cluster.caFile == "/etc/timerd/tls/ca.pem" && cluster.certFile == "/etc/timerd/node.pem")
        #expect(cluster.keyFile == "/etc/timerd/node.key")
        #expect(cluster.prefix == "/prod/timerd/" && cluster.node == "web-1.example" && cluster.leaseTTL == .seconds(15))
        #expect(cluster.tags == ["ssd", "eu-west"])
    }

    @Test func defaults() throws {
        let cluster = try #require(configuration("[cluster]\netcd = http://127.0.0.1:2379\n")?.settings.cluster)
        #expect(cluster.prefix == "/timerd/" && cluster.node == "" && cluster.leaseTTL == .seconds(10))
        #expect(cluster.caFile == nil && cluster.certFile == nil && cluster.keyFile == nil)
        #expect(cluster.tags == [])
    }

    @Test func tagsAreAListWithoutRepeats() throws {
        func tags(_ value: String) throws -> [String]? {
            try #require(configuration("[cluster]\netcd = http://127.0.0.1:2379\ntags = \(value)\n")?.settings.cluster).tags
        }
        #expect(try tags("ssd") == ["ssd"])
        #expect(try tags("gpu.1 ,\tssd,  eu-west , ssd,gpu.1") == ["gpu.1", "ssd", "eu-west"])
        #expect(try tags("") == [])
        #expect(problems("[cluster]\netcd = http://a:1\ntags = ssd, eu west\n") == [
            at(3, "tags: invalid tag \"eu west\": 1 to 64 letters, digits, '_', '.' or '-'"),
        ])
        #expect(problems("[cluster]\netcd = http://a:1\ntags = ssd,\n") == [
            at(3, "tags: invalid tag \"\": 1 to 64 letters, digits, '_', '.' or '-'"),
        ])
        #expect(problems("[cluster]\netcd = http://a:1\ntags = a\ntags = b\n") == [at(4, "tags is given more than once (first at line 3)")])
        #expect(problems("[cluster]\netcd = http://a:1\ntag = ssd\n") == [at(3, "unknown key \"tag\" in [cluster] (did you mean tags?)")])
    }

    @Test func badValuesAreReportedWithTheirLine() {
        #expect(problems("""
            [cluster]
            etcd = 127.0.0.1:2379
            prefix = timerd
            node = web 1
            lease_ttl = 1s
            lease_tll = 5s
            """) == [
            at(2, "etcd: \"127.0.0.1:2379\" is not an http:// or https:// URL (etcd's client URL, like http://127.0.0.1:2379)"),
            at(3, "prefix: expected a key prefix starting with /, like /timerd/, got \"timerd\""),
            at(4, "node: expected 1 to 64 letters, digits, '.', '-' or '_', got \"web 1\""),
            at(5, "lease_ttl: expected whole seconds from 2s to 3600s (etcd leases count seconds), got \"1s\""),
            at(6, "unknown key \"lease_tll\" in [cluster] (did you mean lease_ttl?)"),
        ])
        #expect(problems("[cluster]\nlease_ttl = 2500ms\n") == [
            at(2, "lease_ttl: expected whole seconds from 2s to 3600s (etcd leases count seconds), got \"2500ms\""),
            at(1, "[cluster] needs etcd = http://HOST:2379,… (the etcd cluster the nodes share jobs through)"),
        ].sorted { $0.count < $1.count } .sorted())
        #expect(problems("[cluster]\netcd = http://a:1\n[cluster]\n") == [at(3, "[cluster] is given more than once (first at line 1)")])
        #expect(problems("[cluster \"x\"]\n") == [at(1, "[cluster] takes no name: write [cluster]")])
    }

    @Test func onlyInTheMainFile() {
        #expect(problems("[daemon]\ninclude = jobs.d/*.conf\n", files: ["/etc/timerd/jobs.d/a.conf": "[cluster]\netcd = http://a:1\n"]) == [
            at(1, "[cluster] is allowed only in the main config file (/etc/timerd/timerd.conf); included files hold [job] sections",
               file: "/etc/timerd/jobs.d/a.conf"),
        ])
    }

    /// A main file with `[cluster]` and a job `report` whose keys after its schedule and action, from line 6, are `keys`.
    static func job(_ keys: String) -> String {
        "[cluster]\netcd = http://127.0.0.1:2379\n[job \"report\"]\nevery = 1h\ncommand = true\n" + keys
    }

    @Test func jobsMayBeMarkedSharedAndPlaced() throws {
        let job = try #require(configuration(Self.job("cluster = yes\nrun_on = ssd, eu-west\n"))?.jobs.first?.spec)
        #expect(job.cluster == true && job.runOn == ["ssd", "eu-west"])
        #expect(try #require(configuration(Self.job(""))?.jobs.first?.spec).runOn == [])
    }

    @Test func runOnIsForSharedJobs() {
        #expect(problems(Self.job("run_on = ssd\n")) == [at(6, "run_on needs cluster = yes: only shared jobs are placed on other nodes")])
        #expect(problems(Self.job("cluster = no\nrun_on = ssd\n")) == [
            at(7, "run_on= places shared jobs on the cluster's nodes; a cluster=no job runs on the node that has it"),
        ])
        #expect(problems(Self.job("cluster = yes\nrun_on = ssd,,gpu\n")) == [
            at(7, "run_on: invalid tag \"\": 1 to 64 letters, digits, '_', '.' or '-'"),
        ])
    }
}
