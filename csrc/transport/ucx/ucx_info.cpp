#include "transport/ucx/ucx_info.h"

#include <ucp/api/ucp.h>
#include <uct/api/uct.h>

namespace ringreduce {

std::string ucxVersion() { return ucp_get_version_string(); }

std::vector<std::string> ucxTransports() {
  std::vector<std::string> found;
  uct_component_h* components = nullptr;
  unsigned componentCount = 0;
  if (uct_query_components(&components, &componentCount) != UCS_OK) return found;
  for (unsigned c = 0; c < componentCount; ++c) {
    uct_component_attr_t attr{};
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    if (uct_component_query(components[c], &attr) != UCS_OK) continue;
    std::vector<uct_md_resource_desc_t> mds(attr.md_resource_count);
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attr.md_resources = mds.data();
    if (uct_component_query(components[c], &attr) != UCS_OK) continue;
    for (const auto& mdResource : mds) {
      uct_md_config_t* mdConfig = nullptr;
      if (uct_md_config_read(components[c], nullptr, nullptr, &mdConfig) != UCS_OK) continue;
      uct_md_h md = nullptr;
      const ucs_status_t opened = uct_md_open(components[c], mdResource.md_name, mdConfig, &md);
      uct_config_release(mdConfig);
      if (opened != UCS_OK) continue;
      uct_tl_resource_desc_t* tls = nullptr;
      unsigned tlCount = 0;
      if (uct_md_query_tl_resources(md, &tls, &tlCount) == UCS_OK) {
        for (unsigned t = 0; t < tlCount; ++t) {
          found.push_back(std::string(tls[t].tl_name) + "/" + tls[t].dev_name);
        }
        uct_release_tl_resource_list(tls);
      }
      uct_md_close(md);
    }
  }
  uct_release_component_list(components);
  return found;
}

}  // namespace ringreduce
