// Writes a JTL fixture with the real JMeter engine (Debian's jmeter 2.13 + jmeter-http), built
// through JMeter's Java API because that JMeter's .jmx loader is broken by Debian's newer XStream
// (ForbiddenClassException). Usage: java Fixture PORT OUT.jtl LOOPS [property=value ...]
// Run by regenerate.py; loopback only.
import org.apache.jmeter.control.LoopController;
import org.apache.jmeter.engine.StandardJMeterEngine;
import org.apache.jmeter.protocol.http.sampler.HTTPSamplerProxy;
import org.apache.jmeter.reporters.ResultCollector;
import org.apache.jmeter.reporters.Summariser;
import org.apache.jmeter.testelement.TestPlan;
import org.apache.jmeter.threads.ThreadGroup;
import org.apache.jmeter.util.JMeterUtils;
import org.apache.jorphan.collections.HashTree;

public class Fixture {
    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        String out = args[1];
        JMeterUtils.setJMeterHome("/usr/share/jmeter");
        JMeterUtils.loadJMeterProperties("/usr/share/jmeter/bin/jmeter.properties");
        JMeterUtils.setProperty("jmeter.save.saveservice.output_format", "csv");
        JMeterUtils.setProperty("jmeter.save.saveservice.print_field_names", "true");
        for (int i = 3; i < args.length; i++) {  // extra jmeter.save.saveservice.* settings, key=value
            String[] kv = args[i].split("=", 2);
            JMeterUtils.setProperty(kv[0], kv[1]);
        }
        JMeterUtils.initLocale();
        HashTree plan = new HashTree();
        HashTree group = new HashTree();
        String[][] samplers = {{"GET /, with comma", "/"}, {"GET /missing", "/missing"}};
        for (String[] s : samplers) {
            HTTPSamplerProxy sampler = new HTTPSamplerProxy();
            sampler.setName(s[0]);
            sampler.setDomain("127.0.0.1");
            sampler.setPort(port);
            sampler.setPath(s[1]);
            sampler.setMethod("GET");
            sampler.setUseKeepAlive(true);
            group.add(sampler);
        }
        LoopController loop = new LoopController();
        loop.setLoops(Integer.parseInt(args[2]));
        loop.setFirst(true);
        loop.initialize();
        ThreadGroup threads = new ThreadGroup();
        threads.setName("users");
        threads.setNumThreads(2);
        threads.setRampUp(0);
        threads.setSamplerController(loop);
        TestPlan testPlan = new TestPlan("archlab latency fixture");
        ResultCollector collector = new ResultCollector(new Summariser("summary"));
        collector.setFilename(out);
        HashTree testPlanTree = new HashTree();
        testPlanTree.add(testPlan);
        HashTree threadTree = testPlanTree.add(testPlan, threads);
        threadTree.add(group);
        testPlanTree.add(testPlanTree.getArray()[0], collector);
        StandardJMeterEngine engine = new StandardJMeterEngine();
        engine.configure(testPlanTree);
        engine.run();
    }
}
