//! What a link leaves behind: nothing, whether it is stopped or dropped; a name is owned by
//! one live link at a time; what a killed forwarder leaves (its namespaces, named like a
//! link's) is removed by `cleanup`, by `cleanup_stale`, or by the next link of that name. The
//! killed-process path itself is run through `archlab-engine link` in the engine's tests.
//!
//! Tests that leave stale namespaces or sweep them with `cleanup_stale` hold `serial()`, so
//! that one test's sweep never takes another's leftovers.

mod common;

use archlab_link::{
    cleanup, cleanup_stale, namespace_names, netns, Control, Link, LinkConfig, LinkError, LinkName, ThreadOptions,
};
use common::{assert_nothing_left, finish, raw, serial, start, unique};
use std::process::Command;

fn name(tag: &str) -> LinkName {
    LinkName::new(&unique(tag)).unwrap()
}

/// Leave the namespaces of link `name` as a SIGKILLed forwarder does (its TUN devices die with
/// its descriptors, its lock with the process; the named namespaces stay).
fn leave_stale_namespaces(name: &LinkName) {
    for ns in namespace_names(name) {
        let status = Command::new("ip").args(["netns", "add", &ns]).status().expect("ip (iproute2)");
        assert!(status.success(), "ip netns add {ns}");
    }
}

#[test]
fn a_dropped_link_removes_its_namespaces_and_devices() {
    let link = start(raw("drop"));
    let name = link.config().name.clone();
    let client = link.client().netns.clone();
    // The device exists while the link runs...
    let shown = Command::new("ip").args(["-n", &client, "link", "show", "alk-tun"]).output().unwrap();
    assert!(shown.status.success(), "alk-tun exists in {client}");
    drop(link);
    // ...and nothing is left once it is dropped.
    assert_nothing_left(&name);
}

#[test]
fn a_name_belongs_to_one_live_link() {
    let _sweeps = serial();
    let first = start(raw("busy"));
    let config = first.config().clone();
    match Link::start(&config, Control::new().unwrap(), &ThreadOptions::default()) {
        Err(LinkError::InUse { name, pid }) => {
            assert_eq!(name, config.name.to_string());
            assert_eq!(pid, Some(std::process::id()));
        }
        Err(e) => panic!("expected InUse, got {e}"),
        Ok(_) => panic!("a second link of the same name started"),
    }
    assert!(matches!(cleanup(&config.name), Err(LinkError::InUse { .. })), "cleanup of a live link is refused");
    assert!(!cleanup_stale().unwrap().iter().any(|ns| ns.contains(config.name.as_str())), "a live link is not stale");
    // The refusals disturbed nothing: the first link still forwards.
    assert!(netns::exists(&first.client().netns) && netns::exists(&first.server().netns));
    finish(first);
}

#[test]
fn cleanup_removes_what_a_killed_forwarder_left() {
    let _sweeps = serial();
    let n = name("stale1");
    leave_stale_namespaces(&n);
    let removed = cleanup(&n).unwrap();
    assert_eq!(removed, namespace_names(&n).to_vec());
    assert_nothing_left(&n);
    assert_eq!(cleanup(&n).unwrap(), Vec::<String>::new(), "a second cleanup finds nothing");

    let n = name("stale2");
    leave_stale_namespaces(&n);
    let removed = cleanup_stale().unwrap();
    for ns in namespace_names(&n) {
        assert!(removed.contains(&ns), "{ns} not in {removed:?}");
    }
    assert_nothing_left(&n);
}

#[test]
fn a_new_link_replaces_the_leftovers_of_its_name() {
    let _sweeps = serial();
    let mut r = raw("stale3");
    let n = LinkName::new(&r.name).unwrap();
    leave_stale_namespaces(&n);
    r.mtu = Some(9000);
    let link = start(r);
    assert_eq!(link.ready_info().stale_removed, namespace_names(&n).to_vec());
    let shown = Command::new("ip").args(["-n", &link.server().netns, "link", "show", "alk-tun"]).output().unwrap();
    assert!(String::from_utf8_lossy(&shown.stdout).contains("mtu 9000"), "the new link is configured");
    finish(link);
}

#[test]
fn invalid_parameters_create_nothing() {
    let mut r = raw("invalid");
    r.mtu = Some(100);
    let e = LinkConfig::new(&r).unwrap_err();
    assert_eq!(e.param, "mtu");
    assert_nothing_left(&LinkName::new(&r.name).unwrap());
}
