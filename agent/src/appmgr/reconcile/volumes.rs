//! An app's named volumes on the engine, made before its container. Each named volume
//! `source` of app `app` is the engine volume `<instance>_<app>_<source>`
//! ([`odac_host::names::volume_name`]), labelled with the instance, the app and the owner.
//!
//! Migration from the earlier, ambiguous scheme `<instance>-<app>-<source>`: when the new name
//! does not exist yet and a volume of the old name does, carrying this instance's label and
//! this app's `odac.app` label (and no other owner), the app keeps using the old volume, so no
//! data moves and none is lost. An old volume made by another app (the collision the new
//! scheme fixes: app `fa` volume `b-data` and app `fa-b` volume `data`) carries that other
//! app's label, so this app gets a fresh volume under the new name instead of sharing it.

use std::collections::BTreeMap;

use odac_protocol::AppSpec;

use crate::appmgr::container;
use crate::appmgr::labels;
use crate::appmgr::pass::Pass;
use odac_host::engine::EngineError;

impl Pass<'_> {
    /// Make sure every named volume of `spec` exists; the engine volume to mount for each
    /// source.
    pub(in crate::appmgr) async fn ensure_volumes(
        &self,
        spec: &AppSpec,
    ) -> Result<BTreeMap<String, String>, EngineError> {
        let instance = &self.config.instance;
        let mut volume_labels = self.config.extra_labels.clone();
        volume_labels.insert(odac_host::names::INSTANCE.into(), instance.clone());
        volume_labels.insert(odac_host::names::APP.into(), spec.name.clone());
        labels::set_owner(&mut volume_labels, &self.config.owner);
        let mut names = BTreeMap::new();
        for source in container::volume_sources(spec) {
            let name = odac_host::names::volume_name(instance, &spec.name, &source);
            let engine_name = if self.engine.volume_labels(&name).await?.is_some() {
                name
            } else {
                let legacy = container::legacy_volume_name(instance, &spec.name, &source);
                match self.engine.volume_labels(&legacy).await? {
                    Some(l) if self.is_legacy_volume_of(&l, &spec.name) => {
                        tracing::info!(app = %spec.name, volume = %legacy, "keeping the volume of the earlier naming scheme");
                        legacy
                    }
                    _ => {
                        self.engine.ensure_volume(&name, &volume_labels).await?;
                        name
                    }
                }
            };
            names.insert(source, engine_name);
        }
        Ok(names)
    }

    /// Whether a volume with these labels was made for `app` of this instance (by this agent
    /// or by a version before owner labels).
    fn is_legacy_volume_of(&self, volume: &BTreeMap<String, String>, app: &str) -> bool {
        volume.get(odac_host::names::INSTANCE) == Some(&self.config.instance)
            && volume.get(odac_host::names::APP).map(String::as_str) == Some(app)
            && labels::owner(volume).is_none_or(|o| o == self.config.owner)
    }
}
